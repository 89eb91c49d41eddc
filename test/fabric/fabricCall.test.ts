/**
 * Fabric `POST /mcp/call` on a real mesh: the seed's request and response shapes, its error
 * scenarios (reference node codes), trace ids unique per call, an incoming trace (body object or
 * W3C traceparent) reused as the task's amftraceid, federated MCP tools as fabric.tool.<category>.<name>
 * through the policy and audit path, and SSE streaming of partial results.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import type { McpAuditRecord } from '../../src/protocols/mcp/federation/audit.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

interface Envelope {
  ok: boolean;
  trace: { trace_id: string; span_id: string; parent_span_id: string | null };
  result: Record<string, unknown> | null;
  error: string | null;
  error_code?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Delegates to echo, so the trace can be followed across an agent boundary. */
const relayHandler: WorkerHandler = {
  name: 'relay',
  description: 'asks echo and passes the answer on',
  handle: async (ctx) => ({ text: `relayed: ${await ctx.delegate('echo', ctx.text)}`, confidence: 0.8 }),
};

const failingHandler: WorkerHandler = {
  name: 'broken',
  description: 'always fails',
  handle: async () => {
    throw new Error('disk on fire');
  },
};

let mesh: TestMesh;

async function call(
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Envelope; headers: Headers }> {
  const res = await fetch(`${mesh.url}/mcp/call`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Envelope, headers: res.headers };
}

beforeAll(async () => {
  mesh = await startTestMesh({ config: { http: { requestTimeoutSeconds: 10 } } });
  await mesh.startWorker('echo-1', ['echo'], echoHandler);
  await mesh.startWorker('relay-1', ['relay'], relayHandler);
  await mesh.startWorker('broken-1', ['broken'], failingHandler);
  await mesh.waitFor(() => mesh.http.mcp.catalog().has('echo-1__echo'), 10_000, 'echo tool federated');
}, 60_000);
afterAll(() => mesh?.close());

describe('fabric.call', () => {
  it('runs a task on the named agent and answers the spec envelope', async () => {
    const { status, body, headers } = await call({
      name: 'fabric.call',
      arguments: { agent_id: 'echo-1', capability: 'echo', task: 'hello fabric' },
    });
    expect(status).toBe(200);
    expect(body).toMatchObject({
      ok: true,
      error: null,
      result: {
        answer: 'hello fabric',
        agent_id: 'spiffe://local/worker/echo-1',
        capability: 'echo',
        confidence: 1,
      },
    });
    expect(body.trace.trace_id).toMatch(UUID);
    expect(body.trace.span_id).toMatch(UUID);
    expect(body.trace.parent_span_id).toBeNull();
    expect(headers.get('traceparent')).toBe(
      `00-${body.trace.trace_id.replace(/-/g, '')}-${body.trace.span_id.replace(/-/g, '').slice(0, 16)}-01`,
    );
    const taskId = body.result!.task_id as string;
    const announce = await mesh.waitForEvent(
      (e) => e.subject === 'amf.task.announce.echo' && e.event.amftaskid === taskId,
    );
    expect(announce.event.amftraceid).toBe(body.trace.trace_id);
  });

  it('gives every call a new trace id and span id', async () => {
    const args = { name: 'fabric.call', arguments: { agent_id: '*', capability: 'echo', task: 'x' } };
    const [a, b] = await Promise.all([call(args), call(args)]);
    expect(a.body.ok && b.body.ok).toBe(true);
    expect(a.body.trace.trace_id).not.toBe(b.body.trace.trace_id);
    expect(a.body.trace.span_id).not.toBe(b.body.trace.span_id);
  });

  it('reuses an incoming trace object and carries it across a delegation', async () => {
    const traceId = '7d3f0a52-2c1e-4b8a-9f00-1a2b3c4d5e6f';
    const { body } = await call({
      name: 'fabric.call',
      arguments: {
        agent_id: 'relay-1',
        capability: 'relay',
        task: 'ping',
        trace: { trace_id: traceId, span_id: 'caller-span-1' },
      },
    });
    expect(body).toMatchObject({ ok: true, result: { answer: 'relayed: ping', confidence: 0.8 } });
    expect(body.trace).toMatchObject({ trace_id: traceId, parent_span_id: 'caller-span-1' });
    expect(body.trace.span_id).not.toBe('caller-span-1');
    // The relay's child task on echo (another agent) carries the same trace id.
    const child = await mesh.waitForEvent(
      (e) => e.subject === 'amf.task.announce.echo' && e.event.amftraceid === traceId,
      10_000,
      'child task with the caller trace',
    );
    expect(child.event.amfparentid).toBe(body.result!.task_id);
  });

  it('takes the trace from a W3C traceparent header', async () => {
    const header = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const { body, headers } = await call(
      { name: 'fabric.call', arguments: { agent_id: 'echo-1', capability: 'echo', task: 'w3c' } },
      { traceparent: header },
    );
    expect(body.trace).toMatchObject({
      trace_id: '4bf92f35-77b3-4da6-a3ce-929d0e0e4736',
      parent_span_id: '00f067aa0ba902b7',
    });
    expect(headers.get('traceparent')).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    const taskId = body.result!.task_id as string;
    const final = await mesh.waitForEvent(
      (e) => e.subject === 'amf.result.final' && e.event.amftaskid === taskId,
    );
    expect(final.event.amftraceid).toBe('4bf92f35-77b3-4da6-a3ce-929d0e0e4736');
  });
});

describe('Fabric errors', () => {
  it.each([
    [
      { name: 'fabric.call', arguments: { capability: 'echo', task: 'x' } },
      400,
      'BAD_INPUT',
      /agent_id is required/,
    ],
    [
      { name: 'fabric.call', arguments: { agent_id: 'echo-1', capability: 'echo' } },
      400,
      'BAD_INPUT',
      /task is required/,
    ],
    [
      { name: 'fabric.call', arguments: { agent_id: 'ghost', capability: 'echo', task: 'x' } },
      404,
      'AGENT_NOT_FOUND',
      /ghost/,
    ],
    [
      { name: 'fabric.call', arguments: { agent_id: 'echo-1', capability: 'relay', task: 'x' } },
      404,
      'CAPABILITY_NOT_FOUND',
      /does not offer capability "relay"/,
    ],
    [
      {
        name: 'fabric.call',
        arguments: { agent_id: 'echo-1', capability: 'echo', task: 'x', timeout_ms: 5 },
      },
      400,
      'BAD_INPUT',
      /timeout_ms/,
    ],
    [{ name: 'fabric.nope', arguments: {} }, 400, 'BAD_INPUT', /Unknown tool: fabric\.nope/],
    [{ name: 'fabric.tool.nobody.nothing', arguments: {} }, 404, 'BAD_INPUT', /Unknown tool/],
    [{ arguments: {} }, 400, 'BAD_INPUT', /name is required/],
    [{ name: 'fabric.call', arguments: [] }, 400, 'BAD_INPUT', /arguments must be a JSON object/],
    [
      { name: 'fabric.call', arguments: {}, trace: { trace_id: 'not-a-uuid' } },
      400,
      'BAD_INPUT',
      /trace_id must be a UUID/,
    ],
    ['{"name": ', 400, 'BAD_INPUT', /not valid JSON/],
    [
      {
        name: 'fabric.call',
        arguments: {
          agent_id: 'echo-1',
          capability: 'echo',
          task: 'x',
          context: { blob: 'x'.repeat(70_000) },
        },
      },
      400,
      'BAD_INPUT',
      /context is larger than 65536 bytes/,
    ],
  ])('%j → %i %s', async (request, status, code, message) => {
    const res = await call(request);
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ ok: false, result: null, error_code: code });
    expect(typeof res.body.error).toBe('string'); // the seed spec: error is the message string
    expect(res.body.error).toMatch(message);
    expect(res.body.trace.trace_id).toMatch(UUID);
  });

  it('reports a failing worker as UPSTREAM_ERROR with the trace of the call', async () => {
    const { status, body } = await call({
      name: 'fabric.call',
      arguments: { agent_id: 'broken-1', capability: 'broken', task: 'x' },
    });
    expect(status).toBe(502);
    expect(body).toMatchObject({ ok: false, error_code: 'UPSTREAM_ERROR', result: null });
    // A thrown message may hold a secret: the caller gets handler_error and the task id, never it.
    expect(body.error).toMatch(/handler_error/);
    expect(body.error).not.toMatch(/disk on fire/);
  });
});

describe('fabric.tool.<category>.<name>', () => {
  it('calls a federated MCP tool through the policy and audit path', async () => {
    const { status, body } = await call({
      name: 'fabric.tool.echo-1.echo',
      arguments: { text: 'tool via fabric' },
    });
    expect(status).toBe(200);
    expect(body).toMatchObject({
      ok: true,
      result: { tool: 'spiffe://local/worker/echo-1/echo', text: 'tool via fabric' },
    });
    const records = await mesh.waitFor(async () => {
      const r = (await (await mesh.fetch('/audit?limit=20')).json()) as { records: McpAuditRecord[] };
      return r.records.find((x) => x.wire_name === 'echo-1__echo' && x.outcome === 'ok');
    });
    expect(records).toMatchObject({ decision: 'allow', tool: 'spiffe://local/worker/echo-1/echo' });
  });

  it('lists the tools under their Fabric names', async () => {
    const { body } = await call({ name: 'fabric.tool.list', arguments: {} });
    const names = (body.result!.tools as Array<{ name: string }>).map((t) => t.name);
    expect(names).toContain('fabric.tool.echo-1.echo');
    const agents = await call({ name: 'fabric.agent.list', arguments: { filter: { capability: 'relay' } } });
    expect((agents.body.result!.agents as Array<{ agent_id: string }>).map((a) => a.agent_id)).toEqual([
      'spiffe://local/worker/relay-1',
    ]);
  });
});

describe('streaming', () => {
  it('streams status, token and final events over SSE when stream is true', async () => {
    const res = await fetch(`${mesh.url}/mcp/call`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'fabric.call',
        arguments: { agent_id: 'echo-1', capability: 'echo', task: 'one two three', stream: true },
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    const events = text
      .split('\n\n')
      .filter((block) => block.includes('data: '))
      .map(
        (block) =>
          JSON.parse(block.slice(block.indexOf('data: ') + 6)) as {
            event: string;
            data: Record<string, unknown>;
          },
      );
    const kinds = events.map((e) => e.event);
    expect(kinds[0]).toBe('status');
    expect(kinds.at(-1)).toBe('final');
    const tokens = events.filter((e) => e.event === 'token').map((e) => e.data.delta);
    expect(tokens.join('')).toBe('one two three');
    expect(tokens.length).toBeGreaterThan(1);
    const final = events.at(-1)!.data as unknown as Envelope;
    expect(final).toMatchObject({ ok: true, error: null, result: { answer: 'one two three' } });
    // Every event carries the call's trace.
    for (const e of events) expect((e.data.trace as Envelope['trace']).trace_id).toBe(final.trace.trace_id);
  });

  it('ends a failing stream with a final error event', async () => {
    const res = await fetch(`${mesh.url}/mcp/call`, {
      method: 'POST',
      body: JSON.stringify({
        name: 'fabric.call',
        stream: true,
        arguments: { agent_id: '*', capability: 'broken', task: 'x' },
      }),
    });
    const text = await res.text();
    const last = text.trim().split('\n\n').at(-1)!;
    expect(last.startsWith('event: final')).toBe(true);
    expect(JSON.parse(last.slice(last.indexOf('data: ') + 6)).data).toMatchObject({
      ok: false,
      error_code: 'UPSTREAM_ERROR',
    });
  });
});
