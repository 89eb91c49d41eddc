// External A2A agents bridged into a real mesh (nats-server, coordinator, admission): a mesh task
// for a skill tag reaches the @a2a-js/sdk reference agent and its answer comes back through the
// OpenAI API; an unreachable agent is not fatal and is bridged once it comes up; the mesh's own
// coordinator is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startA2aBridges, type A2aBridges } from '../../src/apps/a2aBridgeApp.js';
import { bridgeTags, toCapabilityTag } from '../../src/a2aClient/skillTags.js';
import type { FinalPayload } from '../../src/events/payloads.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { startReferenceAgent, type ReferenceAgent } from './referenceAgent.js';
import { freePort } from '../../scripts/lib/freePort.mjs';

/** A port nothing listens on (bound once, then released). */
async function chat(mesh: TestMesh, model: string, content: string, stream = false): Promise<Response> {
  return fetch(`${mesh.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content }] }),
  });
}

describe('skill tags', () => {
  it('folds free-text skill ids and tags into capability tags, deduplicated and bounded', () => {
    expect(toCapabilityTag('Weather Forecast')).toBe('weather-forecast');
    expect(toCapabilityTag('summarize_v2')).toBe('summarize-v2');
    expect(toCapabilityTag('Café·Crème')).toBe('cafe-creme');
    expect(toCapabilityTag('***')).toBeUndefined();
    expect(toCapabilityTag('x'.repeat(100))).toHaveLength(64);
    const skills = [
      { id: 'Weather Forecast', tags: ['weather', 'WEATHER', 'a.b'] },
      ...Array.from({ length: 40 }, (_, i) => ({ id: `s${i}`, tags: [] })),
    ].map((s) => ({
      ...s,
      name: s.id,
      description: '',
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    }));
    const tags = bridgeTags('my_agent', skills);
    expect([...tags.keys()].slice(0, 4)).toEqual(['my-agent', 'weather-forecast', 'weather', 'a-b']);
    expect(tags.get('weather')).toBe('Weather Forecast');
    expect(tags.get('my-agent')).toBeUndefined();
    expect(tags.size).toBe(32);
  });
});

describe('external A2A agents bridged into the mesh', () => {
  let mesh: TestMesh;
  let ref: ReferenceAgent;
  let late: ReferenceAgent | undefined;
  let bridges: A2aBridges;
  let latePort: number;

  beforeAll(async () => {
    mesh = await startTestMesh();
    ref = await startReferenceAgent({
      name: 'Forecaster',
      skills: [{ id: 'Weather Forecast', tags: ['weather'] }],
    });
    latePort = await freePort();
    bridges = startA2aBridges({
      agents: [
        { name: 'forecaster', url: ref.url },
        { name: 'late', url: `http://127.0.0.1:${latePort}` },
        { name: 'myself', url: mesh.url },
      ],
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      heartbeatSeconds: 1,
      selfOrigins: [mesh.url],
      retryMs: 100,
      maxRetryMs: 400,
    });
    await bridges.firstAttempts;
  });
  afterAll(async () => {
    await bridges?.close();
    await late?.close();
    await ref?.close();
    await mesh?.close();
  });

  it('bridges the reachable agent with tags from its skills; the others do not stop anything', async () => {
    // The unreachable agent is retried every 100-400 ms: between tries it is `connecting`, so wait
    // for a moment where it shows its failure (a loaded machine may read the status mid-retry).
    const byName = await mesh.waitFor(
      () => {
        const now = Object.fromEntries(bridges.status().map((s) => [s.name, s]));
        return now.late?.state === 'failed' ? now : undefined;
      },
      10_000,
      'the late agent shown failed',
    );
    expect(byName.forecaster).toMatchObject({
      state: 'bridged',
      tags: ['forecaster', 'weather-forecast', 'weather'],
      agentId: 'spiffe://local/worker/a2a-forecaster',
      protocol: 'JSONRPC 1.0',
    });
    expect(byName.late!.state).toBe('failed');
    expect(byName.late!.error).toContain('ECONNREFUSED');
    expect(byName.myself!.state).toBe('refused');
    expect(byName.myself!.error).toContain("mesh's own coordinator");
  });

  it('the bridge worker is admitted like any worker (NATS heartbeats, same pipeline)', async () => {
    await mesh.waitFor(
      () => mesh.coordinator.registry.isLive('spiffe://local/worker/a2a-forecaster'),
      15_000,
      'bridge worker admitted',
    );
    const res = await mesh.fetch('/agents');
    const body = (await res.json()) as { agents: Array<{ agent_id: string; capability_tags: string[] }> };
    const record = body.agents.find((a) => a.agent_id === 'spiffe://local/worker/a2a-forecaster');
    expect(record?.capability_tags).toEqual(['forecaster', 'weather-forecast', 'weather']);
  });

  it('a mesh task for a skill tag reaches the remote agent and its answer comes back (OpenAI API)', async () => {
    await mesh.waitFor(
      () => mesh.coordinator.registry.isLive('spiffe://local/worker/a2a-forecaster'),
      15_000,
    );
    const before = ref.received.length;
    const res = await chat(mesh, 'amf/weather-forecast', 'rain in paris?');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe('ref: RAIN IN PARIS?');
    const taskId = res.headers.get('x-amf-task-id')!;
    const sent = ref.received[before]!;
    expect(sent.metadata).toMatchObject({
      skill: 'Weather Forecast',
      amf: { task_id: taskId, tag: 'weather-forecast' },
    });
    const final = await mesh.waitForEvent(
      (e) => e.event.type === 'amf.result.final' && (e.event.data.payload as FinalPayload).task_id === taskId,
    );
    const payload = final.event.data.payload as FinalPayload;
    expect(payload.agent_id).toBe('spiffe://local/worker/a2a-forecaster');
    expect(payload.result?.data).toMatchObject({ a2a: { agent: 'forecaster', state: 'completed' } });
  });

  it('a streaming request streams the remote artifact chunks', async () => {
    const res = await chat(mesh, 'amf/weather', 'sunny?', true);
    expect(res.status).toBe(200);
    const text = await res.text();
    const deltas = text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map(
        (l) =>
          (JSON.parse(l.slice(6)) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta
            .content,
      )
      .filter((c): c is string => typeof c === 'string' && c.length > 0);
    expect(deltas).toEqual(['ref:', ' SUNNY?']);
  });

  it('a remote failure ends the mesh task failed with a stable a2a_* code', async () => {
    const res = await chat(mesh, 'amf/forecaster', 'fail: no satellite');
    expect(res.status).toBeGreaterThanOrEqual(400);
    const taskId = res.headers.get('x-amf-task-id');
    const final = await mesh.waitForEvent(
      (e) =>
        e.event.type === 'amf.result.final' &&
        (e.event.data.payload as FinalPayload).status === 'failed' &&
        (taskId === null || (e.event.data.payload as FinalPayload).task_id === taskId),
    );
    expect((final.event.data.payload as FinalPayload).error).toMatchObject({
      code: 'a2a_task_failed',
      message: expect.stringContaining('no satellite'),
    });
  });

  it.each([false, true])('a cancelled mesh task cancels the remote task (stream: %s)', async (stream) => {
    const before = ref.cancelled.length;
    const received = ref.received.length;
    const controller = new AbortController();
    const request = fetch(`${mesh.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'amf/forecaster',
        stream,
        messages: [{ role: 'user', content: 'wait' }],
      }),
      signal: controller.signal,
    }).then(
      async (res) => {
        // A streaming response has started: read until the abort ends it.
        await res.body?.getReader().read();
      },
      () => undefined,
    );
    await mesh.waitFor(() => ref.received.length > received, 10_000, 'the remote agent got the task');
    controller.abort();
    await request.catch(() => undefined);
    await mesh.waitFor(() => ref.cancelled.length > before, 10_000, 'the remote task cancelled');
    expect(ref.cancelled).toHaveLength(before + 1);
  });

  it('an agent that was down at boot is bridged once it comes up (retry)', async () => {
    late = await startReferenceAgent({
      name: 'Late',
      port: latePort,
      skills: [{ id: 'late-skill', tags: [] }],
    });
    await mesh.waitFor(
      () => bridges.status().find((s) => s.name === 'late')?.state === 'bridged',
      15_000,
      'late agent bridged',
    );
    await mesh.waitFor(() => mesh.coordinator.registry.isLive('spiffe://local/worker/a2a-late'), 15_000);
    const res = await chat(mesh, 'amf/late-skill', 'finally');
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe('ref: FINALLY');
    expect(bridges.status().find((s) => s.name === 'late')!.attempts).toBeGreaterThan(1);
  });
});
