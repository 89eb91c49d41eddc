// SSE resumability and polling on an AMF `/mcp` (SEP-1699, MCP 2025-11-25): every stream of a
// session that negotiated 2025-11-25 begins with a priming event (an id, `retry`, empty data), POST
// and GET streams alike, whatever older revision a request's header names; an older session gets
// none. A client whose stream ends early resumes it with GET and `Last-Event-ID` and gets what it
// missed: a tool that ends its stream mid-call (as the conformance suite's `test_reconnection`
// does) still answers the official SDK client, and a notification sent while the GET stream was
// away is replayed. The event store behind it keeps a bounded window.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { McpEndpoint } from '../../src/protocols/mcp/endpoint/endpoint.js';
import {
  MAX_AGE_MS,
  MAX_BYTES,
  MAX_EVENTS,
  SessionEventStore,
} from '../../src/protocols/mcp/endpoint/sessionEventStore.js';

let endpoint: McpEndpoint;
let url: string;
let httpServer: http.Server;

function createServer(): Server {
  const server = new Server(
    { name: 'polling', version: '1' },
    { capabilities: { tools: { listChanged: true } } },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [{ name: 'reconnect', inputSchema: { type: 'object' as const } }],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
    // Ends the request's stream before the result: the client must resume to get it.
    await new Promise((r) => setTimeout(r, 50));
    extra.closeSSEStream?.();
    await new Promise((r) => setTimeout(r, 200));
    return { content: [{ type: 'text' as const, text: 'after the reconnection' }] };
  });
  return server;
}

beforeAll(async () => {
  endpoint = new McpEndpoint({ createServer, sseRetryMs: 200 });
  httpServer = http.createServer((req, res) => {
    endpoint.handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}/mcp`;
});
afterAll(async () => {
  await endpoint.close();
  httpServer.closeAllConnections();
  await new Promise<void>((resolve) => httpServer.close(() => resolve()));
});

interface SseEvent {
  id?: string;
  retry?: number;
  data: string;
}

/** Reads SSE events from `res` until `enough` says so (or the body ends), then stops reading. */
async function readEvents(res: Response, enough: (events: SseEvent[]) => boolean): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let pending = '';
  while (!enough(events)) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += value;
    let end;
    while ((end = pending.indexOf('\n\n')) >= 0) {
      const block = pending.slice(0, end);
      pending = pending.slice(end + 2);
      if (block.startsWith(':')) continue; // keep-alive comment
      const event: SseEvent = { data: '' };
      for (const line of block.split('\n')) {
        const [field, ...rest] = line.split(':');
        const value = rest.join(':').replace(/^ /, '');
        if (field === 'id') event.id = value;
        else if (field === 'retry') event.retry = Number(value);
        else if (field === 'data') event.data += value;
      }
      events.push(event);
    }
  }
  await reader.cancel().catch(() => undefined);
  return events;
}

/** A raw session that negotiated `version`; returns its headers for later requests. */
async function session(version: string): Promise<Record<string, string>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  });
  expect(res.status).toBe(200);
  await res.text();
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-session-id': res.headers.get('mcp-session-id')!,
    'mcp-protocol-version': version,
  };
  const ack = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  expect(ack.status).toBe(202);
  return headers;
}

const listTools = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list' });

describe('priming events', () => {
  it('begin every POST stream of a 2025-11-25 session, even for a request that names 2025-03-26', async () => {
    const headers = await session('2025-11-25');
    for (const named of ['2025-11-25', '2025-03-26']) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { ...headers, 'mcp-protocol-version': named },
        body: listTools(2),
      });
      const events = await readEvents(res, () => false);
      expect(events[0], named).toMatchObject({ data: '', retry: 200 });
      expect(events[0]!.id, named).toBeTruthy();
      const answer = JSON.parse(events.at(-1)!.data) as { id: number; result: { tools: unknown[] } };
      expect(answer.result.tools).toHaveLength(1);
    }
  });

  it('are not sent to a session that negotiated an older revision', async () => {
    const headers = await session('2025-03-26');
    const res = await fetch(url, { method: 'POST', headers, body: listTools(2) });
    const events = await readEvents(res, () => false);
    expect(events).toHaveLength(1);
    expect(JSON.parse(events[0]!.data)).toMatchObject({ id: 2 });
  });

  it('begin the GET stream, and resuming from the priming id replays what was sent meanwhile', async () => {
    const headers = await session('2025-11-25');
    const get = { ...headers, accept: 'text/event-stream' };
    const first = await fetch(url, { method: 'GET', headers: get });
    expect(first.status).toBe(200);
    const [priming] = await readEvents(first, (e) => e.length >= 1);
    expect(priming).toMatchObject({ data: '', retry: 200 });
    // Sent while the client is away: kept for its resume.
    await endpoint.broadcast((s) => s.sendToolListChanged());
    // 409 until the server noticed that the first stream is gone (one GET stream per session).
    let resumed: Response;
    const deadline = Date.now() + 3000;
    for (;;) {
      resumed = await fetch(url, { method: 'GET', headers: { ...get, 'last-event-id': priming!.id! } });
      if (resumed.status !== 409 || Date.now() > deadline) break;
      await resumed.text();
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(resumed.status).toBe(200);
    const replayed = await readEvents(resumed, (e) => e.some((x) => x.data !== ''));
    // A resumed stream is a replay, not a new stream: no second priming event.
    expect(replayed[0]!.data).not.toBe('');
    expect(JSON.parse(replayed[0]!.data)).toMatchObject({ method: 'notifications/tools/list_changed' });
  });
});

describe('a stream ended mid-call', () => {
  it('is resumed by the official SDK client, which gets the result', async () => {
    const client = new Client({ name: 'polling-client', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    try {
      const result = await client.callTool({ name: 'reconnect', arguments: {} });
      expect(result.content).toEqual([{ type: 'text', text: 'after the reconnection' }]);
    } finally {
      await client.close();
    }
  });
});

describe('the session event store', () => {
  it(`keeps at most ${MAX_EVENTS} events, ${MAX_BYTES} bytes besides the newest, none older than ${MAX_AGE_MS} ms`, async () => {
    let now = 0;
    const store = new SessionEventStore(() => now);
    const message = (n: number) => ({
      jsonrpc: '2.0' as const,
      method: 'notifications/message',
      params: { n },
    });
    const ids: string[] = [];
    for (let n = 0; n < MAX_EVENTS + 10; n++) ids.push(await store.storeEvent('s', message(n)));
    expect(store.size).toBe(MAX_EVENTS);
    expect(await store.getStreamIdForEventId(ids[0]!)).toBeUndefined();
    expect(await store.getStreamIdForEventId(ids.at(-1)!)).toBe('s');

    // Besides the newest, events fit in the byte budget (the newest is kept whatever its size).
    const sized = (kb: number) => ({
      jsonrpc: '2.0' as const,
      method: 'big',
      params: { text: 'x'.repeat(kb * 1024) },
    });
    for (let n = 0; n < 5; n++) await store.storeEvent('s', sized(100));
    expect(store.size).toBe(3);
    await store.storeEvent('s', sized(1024));
    expect(store.size).toBe(3);

    // Replay sends the events of the same stream after the given id, priming events left out.
    const primed = store.prime('t');
    await store.storeEvent('u', message(1));
    await store.storeEvent('t', message(2));
    const replayed: unknown[] = [];
    expect(await store.replayEventsAfter(primed, { send: async (_id, m) => void replayed.push(m) })).toBe(
      't',
    );
    expect(replayed).toEqual([message(2)]);

    now += MAX_AGE_MS + 1;
    store.prune();
    expect(store.size).toBe(0);
  });
});
