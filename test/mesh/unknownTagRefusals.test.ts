// A request for a model or tag no agent serves leaves a trace: an amf.policy.warning with reason
// no_agent_for_tag on the fabric (and so in JetStream, where the console replays it), for the
// OpenAI door and the A2A door (official A2A SDK client).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { textMessage } from '../a2a/a2aTestKit.js';

interface Warning {
  reason: string;
  message: string;
  details?: { protocol?: string; requested?: string };
}

describe('refusals for unknown models and tags', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('refusal-echo', ['echo'], echoHandler);
  }, 60_000);
  afterAll(async () => {
    await mesh?.close();
  });

  const warned = (protocol: string) =>
    mesh.waitForEvent((e) => {
      const p = e.event.data.payload as Warning;
      return (
        e.subject === 'amf.policy.warning' &&
        p.reason === 'no_agent_for_tag' &&
        p.details?.protocol === protocol
      );
    });

  it('OpenAI: amf/nosuchtag and a non-amf model are refused with 404 and warned', async () => {
    for (const model of ['amf/nosuchtag', 'gpt-4o']) {
      const res = await fetch(`${mesh.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(404);
      await res.arrayBuffer();
    }
    await warned('openai');
    await mesh.waitFor(
      () =>
        mesh.events.filter(
          (e) => e.subject === 'amf.policy.warning' && JSON.stringify(e.event.data).includes('gpt-4o'),
        ).length === 1,
    );
    const payloads = mesh.events
      .filter((e) => e.subject === 'amf.policy.warning')
      .map((e) => e.event.data.payload as Warning);
    expect(payloads).toContainEqual(
      expect.objectContaining({
        reason: 'no_agent_for_tag',
        message: expect.stringContaining('no live agent serves capability "nosuchtag"'),
        details: { protocol: 'openai', requested: 'amf/nosuchtag' },
      }),
    );
    // Kept in JetStream: the console's history replay finds it.
    const history = (await (await mesh.fetch('/events/history?subject=amf.policy.warning')).json()) as {
      events: Array<{ event: { data: { payload: Warning } } }>;
    };
    expect(history.events.map((e) => e.event.data.payload.details?.requested)).toContain('amf/nosuchtag');
  });

  it('A2A: a message for a tag no agent serves is refused and warned', async () => {
    const client = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ['JSONRPC'] }),
    ).createFromUrl(mesh.url);
    await expect(
      client.sendMessage(textMessage('hello', { metadata: { tag: 'nosuchtag' } })),
    ).rejects.toThrow(/no live agent serves capability "nosuchtag"/);
    const warning = await warned('a2a');
    expect(warning.event.data.payload).toMatchObject({
      reason: 'no_agent_for_tag',
      details: { protocol: 'a2a', requested: 'tag nosuchtag' },
    });
  });

  it('Fabric: fabric.call for a capability no agent offers is refused and warned', async () => {
    const res = await fetch(`${mesh.url}/mcp/call`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'fabric.call',
        arguments: { agent_id: '*', capability: 'nosuchtag', task: 'x' },
      }),
    });
    expect(res.status).toBe(404);
    await res.arrayBuffer();
    const warning = await warned('fabric');
    expect(warning.event.data.payload).toMatchObject({
      details: { protocol: 'fabric', requested: 'capability nosuchtag' },
    });
  });
});
