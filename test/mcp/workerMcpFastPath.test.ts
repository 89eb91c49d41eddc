/**
 * A worker's `/mcp` answers a plain `tools/call` of its handler's tool as one JSON body, without the
 * SDK server transport (protocols/mcp/endpoint/sessionFastPath.ts, issue 31), with what the SDK path
 * gives: the same results and errors, the call aborted when the client cancels it or goes away,
 * STOPPING_ERROR when the endpoint stops, the session counted busy while the call runs, the
 * coordinator's fingerprint noted. A call cancelled at the coordinator's fast path reaches the
 * worker's handler as an abort. Calls asking for more (progress) and the handler's other tools
 * keep the SDK path; the official SDK clients (1.x and 2.x) get correct answers either way.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { connectV2, textOf } from './mcpClientKit.js';
import { HandlerError, type WorkerHandler } from '../../src/worker/handlerApi.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import type { MeshWorker } from '../../src/worker/meshWorker.js';
import { createWorkerMcpEndpoint } from '../../src/protocols/mcp/worker/endpoint.js';
import { STOPPING_ERROR } from '../../src/protocols/mcp/endpoint/endpoint.js';
import {
  COORDINATOR_FINGERPRINT_HEADER,
  CoordinatorFingerprintRecord,
} from '../../src/protocols/mcp/coordinatorFingerprint.js';

/** What one waiting run went through: it started, then its signal aborted. */
interface Run {
  started: Promise<void>;
  aborted: Promise<void>;
  start(): void;
  abort(): void;
}

const runs = new Map<string, Run>();

/** The run of the task text `text` (created on first mention, by the test or the handler). */
function runOf(text: string): Run {
  let run = runs.get(text);
  if (!run) {
    let start!: () => void;
    let abort!: () => void;
    const started = new Promise<void>((r) => (start = r));
    const aborted = new Promise<void>((r) => (abort = r));
    run = { started, aborted, start, abort };
    runs.set(text, run);
  }
  return run;
}

/** Echo, except `fail` (a handler error) and `wait:…` (runs until its signal aborts). */
const handler: WorkerHandler = {
  name: 'echo',
  description: 'Echoes its text; `fail` fails, `wait:<x>` waits until it is aborted.',
  handle: async (ctx) => {
    if (ctx.text === 'fail') throw new HandlerError('asked_to_fail', 'the test asked this call to fail');
    if (!ctx.text.startsWith('wait:')) return ctx.text;
    const run = runOf(ctx.text);
    run.start();
    await new Promise((resolve) => {
      if (ctx.signal.aborted) resolve(undefined);
      else ctx.signal.addEventListener('abort', resolve, { once: true });
    });
    run.abort();
    return 'aborted';
  },
  mcp: {
    tools: [
      {
        definition: {
          name: 'count',
          description: 'Counts to three with progress',
          inputSchema: { type: 'object', properties: {} },
        },
        call: async (_args, ctx) => {
          for (let i = 1; i <= 3; i++) await ctx.progress(i, 3);
          return { content: [{ type: 'text', text: 'counted' }] };
        },
      },
    ],
  },
};

let mesh: TestMesh;
let worker: RunningWorker;
let url: string;
let client: Client;
let transport: StreamableHTTPClientTransport;

beforeAll(async () => {
  mesh = await startTestMesh();
  worker = await mesh.startWorker('mcp-worker-fast', ['echo'], handler);
  url = `${worker.url}/mcp`;
  client = new Client({ name: 'amf-test', version: '1.0.0' });
  transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
}, 60_000);
afterAll(async () => {
  await client?.close();
  await mesh?.close();
});

interface Answer {
  type: string;
  sessionId: string | null;
  /** The JSON-RPC response (undefined when the answer carried none). */
  response: Record<string, unknown> | undefined;
  /** Every message of the answer, in order. */
  messages: Record<string, unknown>[];
}

/** The headers of a raw POST in the SDK client's session. */
function sessionHeaders(): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-session-id': transport.sessionId!,
    'mcp-protocol-version': transport.protocolVersion!,
  };
}

/** One raw POST of `message` in the SDK client's session. */
async function post(message: object, signal?: AbortSignal): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: sessionHeaders(),
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
    ...(signal ? { signal } : {}),
  });
  expect(res.status).toBe(200);
  return answerOf(res);
}

async function answerOf(res: Response): Promise<Answer> {
  const type = res.headers.get('content-type') ?? '';
  const text = await res.text();
  const messages = type.startsWith('text/event-stream')
    ? text
        .split('\n')
        // A priming event (SEP-1699) carries an id and empty data.
        .filter((l) => l.startsWith('data: ') && l.length > 6)
        .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>)
    : [JSON.parse(text) as Record<string, unknown>];
  return {
    type,
    sessionId: res.headers.get('mcp-session-id'),
    response: messages.find((m) => 'result' in m || 'error' in m),
    messages,
  };
}

describe("a worker's /mcp fast path", () => {
  it('answers a plain tools/call of its tool with one JSON body and the handler result', async () => {
    const answer = await post({
      id: 'fast-1',
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'fast hello' }, _meta: { 'amf/caller': 'someone' } },
    });
    expect(answer.type).toMatch(/^application\/json/);
    expect(answer.sessionId).toBe(transport.sessionId);
    expect(answer.response).toEqual({
      jsonrpc: '2.0',
      id: 'fast-1',
      result: { content: [{ type: 'text', text: 'fast hello' }] },
    });
  });

  it('leaves a call with a progress token to the SDK path (an SSE stream) with the same result', async () => {
    const answer = await post({
      id: 7,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'sse hello' }, _meta: { progressToken: 'p-1' } },
    });
    expect(answer.type).toMatch(/^text\/event-stream/);
    expect(answer.response).toEqual({
      jsonrpc: '2.0',
      id: 7,
      result: { content: [{ type: 'text', text: 'sse hello' }] },
    });
  });

  it("sends a surface tool's progress over SSE, to the official client too", async () => {
    const answer = await post({
      id: 8,
      method: 'tools/call',
      params: { name: 'count', arguments: {}, _meta: { progressToken: 'p-2' } },
    });
    expect(answer.type).toMatch(/^text\/event-stream/);
    const progress = answer.messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((m) => (m.params as Progress).progress)).toEqual([1, 2, 3]);
    expect(textOf(answer.response!.result)).toBe('counted');
    const seen: number[] = [];
    const result = await client.callTool({ name: 'count', arguments: {} }, undefined, {
      onprogress: (p) => seen.push(p.progress),
    });
    expect(seen).toEqual([1, 2, 3]);
    expect(textOf(result)).toBe('counted');
  });

  it('answers an unknown tool, a missing `text` and a failing handler as the SDK path does', async () => {
    const both = async (params: Record<string, unknown>) => {
      const fast = await post({ id: 1, method: 'tools/call', params });
      const sdk = await post({
        id: 1,
        method: 'tools/call',
        params: { ...params, _meta: { progressToken: 'p-3' } },
      });
      expect(sdk.type).toMatch(/^text\/event-stream/);
      expect(fast.response).toEqual(sdk.response);
      return fast;
    };
    const unknown = await both({ name: 'nobody', arguments: { text: 'x' } });
    expect(unknown.response!.error).toEqual({
      code: -32602,
      message: 'MCP error -32602: Tool nobody not found',
    });
    const missing = await both({ name: 'echo', arguments: {} });
    expect(missing.type).toMatch(/^application\/json/);
    expect(missing.response!.result).toEqual({
      content: [{ type: 'text', text: 'argument "text" (string) is required' }],
      isError: true,
    });
    const failing = await both({ name: 'echo', arguments: { text: 'fail' } });
    expect(failing.type).toMatch(/^application\/json/);
    expect((failing.response!.result as CallToolResult).isError).toBe(true);
    expect(textOf(failing.response!.result)).toContain('the test asked this call to fail');
  });

  it('serves many concurrent calls of one session to the official SDK 1.x client', async () => {
    const texts = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        client.callTool({ name: 'echo', arguments: { text: `n${i}` } }).then(textOf),
      ),
    );
    expect(texts).toEqual(Array.from({ length: 20 }, (_, i) => `n${i}`));
  });

  it('answers the official 2.x client as one JSON body too', async () => {
    const { client: v2, callTypes: types } = await connectV2(url);
    try {
      const results = await Promise.all(
        ['one', 'two', 'three'].map((t) => v2.callTool({ name: 'echo', arguments: { text: t } })),
      );
      expect(results.map((r) => textOf(r))).toEqual(['one', 'two', 'three']);
      expect(types).toHaveLength(3);
      for (const t of types) expect(t).toMatch(/^application\/json/);
    } finally {
      await v2.close();
    }
  });

  it('aborts the call when the client cancels it, and sends it no response', async () => {
    const raw = post({
      id: 'cancel-me',
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'wait:raw-cancel' } },
    });
    await runOf('wait:raw-cancel').started;
    const notified = await fetch(url, {
      method: 'POST',
      headers: sessionHeaders(),
      body: JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 'cancel-me', reason: 'no longer needed' },
      }),
    });
    expect(notified.status).toBe(202);
    await runOf('wait:raw-cancel').aborted;
    const answer = await raw;
    expect(answer.type).toMatch(/^text\/event-stream/);
    expect(answer.messages).toEqual([]);
    // The official client cancels through notifications/cancelled as well.
    const stop = new AbortController();
    const call = client.callTool({ name: 'echo', arguments: { text: 'wait:sdk-cancel' } }, undefined, {
      signal: stop.signal,
    });
    await runOf('wait:sdk-cancel').started;
    stop.abort();
    await expect(call).rejects.toThrow();
    await runOf('wait:sdk-cancel').aborted;
    // The session is still fine.
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'after' } }))).toBe('after');
  });

  it("aborts the worker's handler when a client cancels the call at the coordinator", async () => {
    const viaCoordinator = new Client({ name: 'amf-test-coordinator', version: '1.0.0' });
    await viaCoordinator.connect(new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`)));
    try {
      const tool = 'mcp-worker-fast__echo';
      await mesh.waitFor(async () => (await viaCoordinator.listTools()).tools.some((t) => t.name === tool));
      const stop = new AbortController();
      const call = viaCoordinator.callTool(
        { name: tool, arguments: { text: 'wait:coordinator-cancel' } },
        undefined,
        { signal: stop.signal },
      );
      await runOf('wait:coordinator-cancel').started;
      stop.abort();
      await expect(call).rejects.toThrow();
      await runOf('wait:coordinator-cancel').aborted;
    } finally {
      await viaCoordinator.close();
    }
  });

  it('aborts the call when the client goes away', async () => {
    const gone = new AbortController();
    const raw = post(
      { id: 'gone', method: 'tools/call', params: { name: 'echo', arguments: { text: 'wait:gone' } } },
      gone.signal,
    ).catch((err: unknown) => err);
    await runOf('wait:gone').started;
    gone.abort();
    await runOf('wait:gone').aborted;
    expect(await raw).toBeInstanceOf(Error);
  });
});

describe("a worker's /mcp fast path on its own endpoint", () => {
  /** A worker endpoint on node:http whose worker runs every task until its signal aborts. */
  async function endpointServer(maxSessionsPerClient?: number) {
    const started: string[] = [];
    const stub = {
      run: (task: { text: string }, { signal }: { signal: AbortSignal }) =>
        new Promise((resolve) => {
          started.push(task.text);
          const end = () => resolve({ ok: false, code: 'cancelled', message: 'aborted' });
          if (signal.aborted) end();
          else signal.addEventListener('abort', end, { once: true });
        }),
    } as unknown as MeshWorker;
    const fingerprints = new CoordinatorFingerprintRecord();
    const endpoint = createWorkerMcpEndpoint({
      handler: { name: 'echo', description: 'waits', handle: () => Promise.resolve('') },
      tag: 'echo',
      version: 'test',
      getWorker: () => stub,
      coordinatorFingerprint: fingerprints,
      ...(maxSessionsPerClient !== undefined ? { sessions: { maxSessionsPerClient } } : {}),
    });
    const server = http.createServer((req, res) => void endpoint.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const initialize = () =>
      fetch(base, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: {
            protocolVersion: '2025-11-25',
            capabilities: {},
            clientInfo: { name: 't', version: '1' },
          },
        }),
      });
    const opened = await initialize();
    await opened.text();
    const session = {
      ...headers,
      'mcp-session-id': opened.headers.get('mcp-session-id')!,
      'mcp-protocol-version': '2025-11-25',
    };
    const call = (text: string, extra: Record<string, string> = {}) =>
      fetch(base, {
        method: 'POST',
        headers: { ...session, ...extra },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: text,
          method: 'tools/call',
          params: { name: 'echo', arguments: { text } },
        }),
      });
    const waitStarted = async (text: string) => {
      for (let i = 0; i < 200 && !started.includes(text); i++) await new Promise((r) => setTimeout(r, 10));
      expect(started).toContain(text);
    };
    const close = async () => {
      await endpoint.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    };
    return { endpoint, fingerprints, initialize, call, waitStarted, close };
  }

  it("notes the coordinator's fingerprint sent on a fast call", async () => {
    const s = await endpointServer();
    try {
      const fingerprint = Array.from({ length: 32 }, () => 'AB').join(':');
      const pending = s.call('noted', { [COORDINATOR_FINGERPRINT_HEADER]: fingerprint });
      await s.waitStarted('noted');
      expect(s.fingerprints.first?.fingerprint).toBe(fingerprint);
      void pending.then((r) => r.text()).catch(() => undefined);
    } finally {
      await s.close();
    }
  });

  it('counts its session busy while a fast call runs: a client at its share is refused', async () => {
    const s = await endpointServer(1);
    try {
      const pending = s.call('busy');
      await s.waitStarted('busy');
      expect((await s.initialize()).status).toBe(429);
      void pending.then((r) => r.text()).catch(() => undefined);
    } finally {
      await s.close();
    }
  });

  it('answers a fast call in flight with STOPPING_ERROR when the endpoint stops', async () => {
    const s = await endpointServer();
    const pending = s.call('stopped');
    await s.waitStarted('stopped');
    const closing = s.close();
    const res = await pending;
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: 'stopped', error: STOPPING_ERROR });
    await closing;
  });
});
