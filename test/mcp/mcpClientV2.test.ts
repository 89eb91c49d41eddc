/**
 * The official MCP client 2.x (`@modelcontextprotocol/client`) through the coordinator's `/mcp`
 * (issue 31): its plain `tools/call` is the same request as the 1.x client's and takes the fast
 * path (one JSON body), with policy, audit and the plaintext warning; an unknown tool is the same
 * JSON-RPC error; a 2.x client that declared elicitation still answers a worker's request relayed
 * mid-call. The plaintext warning of a call is published when the call ends (with its audit
 * record), or while it runs when it runs long.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';
import { connectV2 as connectV2At, textOf } from './mcpClientKit.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import type { McpAuditRecord } from '../../src/protocols/mcp/federation/audit.js';
// @ts-expect-error: an example handler module without types
import conformanceHandler from '../fixtures/mcpConformanceBase.mjs';

let mesh: TestMesh;
let echoAgent: string;
let slowAgent: string;

/** Answers with its text after `ms` milliseconds given in the text (`"<ms> <words>"`). */
const slowHandler: WorkerHandler = {
  name: 'slow',
  description: 'Waits the milliseconds its text starts with, then echoes it.',
  handle: async (ctx) => {
    await new Promise((resolve) => setTimeout(resolve, Number(ctx.text.split(' ')[0])));
    return ctx.text;
  },
};

beforeAll(async () => {
  mesh = await startTestMesh();
  echoAgent = (await mesh.startWorker('v2-echo', ['echo'], echoHandler)).worker.agentId;
  slowAgent = (await mesh.startWorker('v2-slow', ['slow'], slowHandler)).worker.agentId;
  await mesh.startWorker('v2-caps', ['caps'], conformanceHandler as WorkerHandler);
  await mesh.waitFor(
    () =>
      ['v2-echo__echo', 'v2-slow__slow', 'v2-caps__test_elicitation'].every((n) =>
        mesh.http.mcp.listTools().some((t) => t.name === n),
      ),
    15_000,
    'the three workers federated',
  );
}, 60_000);
afterAll(async () => {
  await mesh?.close();
});

/** A 2.x client of the coordinator's `/mcp` (mcpClientKit.ts). */
const connectV2 = (options?: Parameters<typeof connectV2At>[1]) => connectV2At(`${mesh.url}/mcp`, options);

function warningsFor(agentId: string): ObservedEvent[] {
  return mesh.events.filter(
    (e) =>
      e.event.type === 'amf.policy.warning' &&
      (e.event.data.payload as { reason?: string }).reason === 'mcp_call_unauthenticated' &&
      (e.event.data.payload as { agent_id?: string }).agent_id === agentId,
  );
}

async function audit(limit: number): Promise<McpAuditRecord[]> {
  const res = await mesh.fetch(`/audit?limit=${limit}`);
  return ((await res.json()) as { records: McpAuditRecord[] }).records;
}

describe('the official MCP client 2.x through the coordinator', () => {
  it('has its plain calls answered on the fast path, audited and warned about, one by one', async () => {
    const { client, callTypes } = await connectV2();
    try {
      const before = warningsFor(echoAgent).length;
      for (const t of ['one', 'two', 'three'])
        expect(textOf(await client.callTool({ name: 'v2-echo__echo', arguments: { text: t } }))).toBe(t);
      // One JSON body per call: the fast path (the SDK server transport answers with an SSE stream).
      expect(callTypes).toHaveLength(3);
      for (const type of callTypes) expect(type).toMatch(/^application\/json/);
      await mesh.waitFor(() => warningsFor(echoAgent).length >= before + 3, 5000, 'a warning per call');
      await mesh.waitFor(
        async () =>
          (await audit(50)).filter((r) => r.wire_name === 'v2-echo__echo' && r.outcome === 'ok').length >= 3,
        5000,
        'an audit record per call',
      );
    } finally {
      await client.close();
    }
  });

  it('gets the same JSON-RPC error for an unknown tool as the 1.x client', async () => {
    const { client } = await connectV2();
    try {
      const err = await client.callTool({ name: 'v2-echo__nope', arguments: {} }).then(
        () => undefined,
        (e: unknown) => e as { code?: number; message?: string },
      );
      expect(err?.code).toBe(-32602);
      expect(err?.message).toMatch(/v2-echo__nope not found/);
    } finally {
      await client.close();
    }
  });

  it('answers an elicitation a worker sends mid-call when it declared elicitation', async () => {
    const { client, callTypes } = await connectV2({ capabilities: { elicitation: {} } });
    client.setRequestHandler('elicitation/create', () => ({
      action: 'accept' as const,
      content: { username: 'ada', email: 'ada@example.org' },
    }));
    try {
      const result = await client.callTool({
        name: 'v2-caps__test_elicitation',
        arguments: { message: 'who?' },
      });
      expect(textOf(result)).toBe(
        'User response: action=accept, content={"username":"ada","email":"ada@example.org"}',
      );
      // The relayed request travels on the call's own SSE stream: the SDK path, not the fast one.
      expect(callTypes.at(-1)).toMatch(/^text\/event-stream/);
      // Its plain calls still reach the agent (through its own connection).
      expect(textOf(await client.callTool({ name: 'v2-echo__echo', arguments: { text: 'still' } }))).toBe(
        'still',
      );
    } finally {
      await client.close();
    }
  });
});

describe('the plaintext warning of a call', () => {
  it('is published when the call ends, not while the agent works on it', async () => {
    const { client } = await connectV2();
    try {
      const before = warningsFor(slowAgent).length;
      const started = Date.now();
      expect(textOf(await client.callTool({ name: 'v2-slow__slow', arguments: { text: '300 ms' } }))).toBe(
        '300 ms',
      );
      await mesh.waitFor(() => warningsFor(slowAgent).length > before, 5000, 'the warning');
      const sent = Date.parse(warningsFor(slowAgent).at(-1)!.event.time);
      expect(sent).toBeGreaterThanOrEqual(started + 250);
    } finally {
      await client.close();
    }
  });

  it('is published while a long call still runs', async () => {
    const { client } = await connectV2();
    try {
      const before = warningsFor(slowAgent).length;
      const started = Date.now();
      await client.callTool({ name: 'v2-slow__slow', arguments: { text: '2500 ms' } });
      const answered = Date.now();
      await mesh.waitFor(() => warningsFor(slowAgent).length > before, 5000, 'the warning');
      const sent = Date.parse(warningsFor(slowAgent).at(-1)!.event.time);
      expect(sent).toBeGreaterThanOrEqual(started);
      expect(sent).toBeLessThan(answered - 500);
      // One warning for the call, not a second at its end.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(warningsFor(slowAgent).length).toBe(before + 1);
    } finally {
      await client.close();
    }
  }, 15_000);
});
