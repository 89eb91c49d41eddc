// MCP sessions tried as an attacker and as an ordinary local client: `initialize` needs no
// credential, so the session table is bounded per client address and in total, and idle sessions
// expire. On one machine every client is 127.0.0.1 and the official SDK's `Client.close()` never
// ends its session, so a client at its share is not refused: its least recently used idle session
// makes room, those never used after initialize first. A flood of initialize calls from one address
// thus closes only that address's idle sessions, never one in use (a request in flight, a stream
// open) nor another address's; a client is refused (429 in JSON-RPC shape) only when every session
// it holds is busy. The coordinator's links to a worker count apart from the local clients there.
// Sessions nobody uses are closed, so rounds of new sessions keep the table (and memory) flat.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { McpEndpoint, type McpSessionLimits } from '../../src/protocols/mcp/endpoint/endpoint.js';
import { nodeFetch } from '../../src/protocols/mcp/federation/nodeFetch.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { heapUsedAfterGc } from '../helpers/forceGc.js';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'flood', version: '1' } },
});

interface RawReply {
  status: number;
  sessionId: string | undefined;
  body: string;
}

/** One raw POST from `localAddress` (a loopback address of this host) over `agent`. */
function rawPost(
  url: string,
  agent: http.Agent,
  body: string,
  headers: Record<string, string> = {},
): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const sid = res.headers['mcp-session-id'];
          resolve({
            status: res.statusCode ?? 0,
            sessionId: typeof sid === 'string' ? sid : undefined,
            body: Buffer.concat(chunks).toString('utf8'),
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** `count` raw initialize calls from `agent`'s address, `parallel` at a time. */
async function flood(url: string, agent: http.Agent, count: number, parallel = 16): Promise<RawReply[]> {
  const replies: RawReply[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) {
        next++;
        replies.push(await rawPost(url, agent, INITIALIZE));
      }
    }),
  );
  return replies;
}

/** An official SDK client whose requests leave from `localAddress`. */
async function sdkClientFrom(
  url: string,
  localAddress: string,
): Promise<{ client: Client; agent: http.Agent }> {
  const agent = new http.Agent({ keepAlive: true, localAddress });
  const client = new Client({ name: `client-${localAddress}`, version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: nodeFetch(agent) }));
  return { client, agent };
}

/** A raw session from `agent`: initialized, then used once (a ping), as a script's client would. */
async function usedSession(url: string, agent: http.Agent): Promise<(id: number) => Promise<RawReply>> {
  const opened = await rawPost(url, agent, INITIALIZE);
  expect(opened.status).toBe(200);
  const session = { 'mcp-session-id': opened.sessionId!, 'mcp-protocol-version': '2025-11-25' };
  const ping = (id: number) =>
    rawPost(url, agent, JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' }), session);
  expect((await ping(2)).status).toBe(200);
  return ping;
}

function expectTooManySessions(reply: RawReply, address: string): void {
  expect(reply.status).toBe(429);
  const body = JSON.parse(reply.body) as {
    jsonrpc: string;
    id: unknown;
    error: { code: number; message: string };
  };
  expect(body.jsonrpc).toBe('2.0');
  expect(body.id).toBeNull();
  expect(body.error.code).toBe(-32000);
  expect(body.error.message).toContain(`too many MCP sessions from ${address}`);
}

describe("the coordinator's /mcp under an initialize flood", () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('echo-1', ['echo'], echoHandler);
  });
  afterAll(() => mesh?.close());

  it('1,100 initialize calls from 127.0.0.1 close only its idle sessions: active clients there and elsewhere keep theirs', async () => {
    const url = `${mesh.url}/mcp`;
    await mesh.waitFor(() => mesh.http.mcp.listTools().length > 0, 10_000, 'the federated echo tool');
    // Active on the flooded address: an SDK client (its notification stream open) and a script's
    // session that pings between the flood's batches. And one on another address.
    const ide = await sdkClientFrom(url, '127.0.0.1');
    const before = await ide.client.listTools();
    expect(before.tools.length).toBeGreaterThan(0);
    const scriptAgent = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1' });
    const script = await usedSession(url, scriptAgent);
    const elsewhere = await sdkClientFrom(url, '127.0.0.2');

    const attacker = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1', maxSockets: 16 });
    const replies: RawReply[] = [];
    for (let batch = 0; batch < 11; batch++) {
      replies.push(...(await flood(url, attacker, 100)));
      expect((await script(100 + batch)).status, `the script's session after batch ${batch}`).toBe(200);
    }
    // Nobody is refused: each new session took the place of an idle one of the same address.
    expect(replies.filter((r) => r.status === 200)).toHaveLength(1100);
    expect(new Set(replies.map((r) => r.sessionId)).size).toBe(1100);
    // The address still holds at most its share: of the flood's last 40 sessions, at most 30 are
    // open (the IDE's and the script's hold two of the 32).
    let open = 0;
    for (const r of replies.slice(-40)) {
      const ping = await rawPost(url, attacker, JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' }), {
        'mcp-session-id': r.sessionId!,
        'mcp-protocol-version': '2025-11-25',
      });
      if (ping.status === 200) open++;
      else expect(ping.status).toBe(404);
    }
    expect(open).toBeGreaterThan(0);
    expect(open).toBeLessThanOrEqual(30);

    // The active sessions survived the flood and still answer; another address was never touched.
    const after = await ide.client.listTools();
    expect(after.tools.map((t) => t.name)).toEqual(before.tools.map((t) => t.name));
    expect(
      (await ide.client.callTool({ name: before.tools[0]!.name, arguments: { text: 'still here' } })).isError,
    ).toBeFalsy();
    expect((await script(999)).status).toBe(200);
    expect((await elsewhere.client.listTools()).tools.length).toBe(before.tools.length);

    // The flood's first sessions were closed to make room: 404, initialize again.
    const first = replies[0]!;
    const stale = await rawPost(url, attacker, JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'ping' }), {
      'mcp-session-id': first.sessionId!,
      'mcp-protocol-version': '2025-11-25',
    });
    expect(stale.status).toBe(404);

    for (const c of [ide, elsewhere]) {
      await c.client.close();
      c.agent.destroy();
    }
    scriptAgent.destroy();
    attacker.destroy();
  });

  it('100 ordinary SDK client uses in a row (connect, call, close without DELETE) all succeed', async () => {
    const url = `${mesh.url}/mcp`;
    const name = (await mesh.waitFor(
      () => mesh.http.mcp.listTools().find((t) => t.name.endsWith('__echo')),
      10_000,
      'the federated echo tool',
    ))!.name;
    for (let i = 0; i < 100; i++) {
      const { client, agent } = await sdkClientFrom(url, '127.0.0.1');
      const result = await client.callTool({ name, arguments: { text: `use ${i}` } });
      expect(JSON.stringify(result.content), `use ${i}`).toContain(`use ${i}`);
      // The official client's close(): no DELETE, the session stays behind on the server.
      await client.close();
      agent.destroy();
    }
  }, 60_000);
});

/** A bare endpoint with one tool on node:http, so the test can read its session table. */
async function bareEndpoint(options: {
  sessionIdleMs: number;
  maxSessionsPerClient?: number;
  maxSessions?: number;
}): Promise<{ endpoint: McpEndpoint; url: string; close(): Promise<void> }> {
  const endpoint = new McpEndpoint({
    ...options,
    createServer: () => {
      const server = new Server({ name: 'bare', version: '1' }, { capabilities: { tools: {} } });
      server.setRequestHandler(ListToolsRequestSchema, () => ({
        tools: [{ name: 'noop', inputSchema: { type: 'object' } }],
      }));
      return server;
    },
  });
  const server = http.createServer((req, res) => {
    endpoint.handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint,
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      await endpoint.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('idle MCP sessions expire', () => {
  it('closes a session unused for the idle time: its client then gets 404, and the slot is free again', async () => {
    const bare = await bareEndpoint({ sessionIdleMs: 300, maxSessionsPerClient: 4 });
    const agent = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1' });
    try {
      // In use: requests closer together than the idle time keep a session.
      const opened = await rawPost(bare.url, agent, INITIALIZE);
      const session = { 'mcp-session-id': opened.sessionId!, 'mcp-protocol-version': '2025-11-25' };
      for (let i = 0; i < 5; i++) {
        await new Promise((r) => setTimeout(r, 150));
        const ping = await rawPost(
          bare.url,
          agent,
          JSON.stringify({ jsonrpc: '2.0', id: i + 2, method: 'ping' }),
          session,
        );
        expect(ping.status, `ping ${i}`).toBe(200);
      }
      // An SDK client that goes away without ending its session (no DELETE) leaves it behind...
      const sdk = await sdkClientFrom(bare.url, '127.0.0.1');
      expect((await sdk.client.listTools()).tools).toHaveLength(1);
      await sdk.client.close();
      sdk.agent.destroy();
      expect(bare.endpoint.sessionCount).toBe(2);
      // ...until both are idle for the idle time: closed, the address's slots given back.
      await waitUntil(() => bare.endpoint.sessionCount === 0, 3000, 'the idle sessions to expire');
      expect(bare.endpoint.sessionsOf('127.0.0.1')).toBe(0);
      const late = await rawPost(
        bare.url,
        agent,
        JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }),
        session,
      );
      expect(late.status).toBe(404);

      // Past a full share, each new session takes the place of an idle one; all of them expire.
      const full = await flood(bare.url, agent, 6, 1);
      expect(full.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(bare.endpoint.sessionsOf('127.0.0.1')).toBe(4);
      await waitUntil(() => bare.endpoint.sessionCount === 0, 3000, 'the full share to expire');
      expect((await rawPost(bare.url, agent, INITIALIZE)).status).toBe(200);
    } finally {
      agent.destroy();
      await bare.close();
    }
  });

  it('keeps a session whose client holds its notification stream open (a connected IDE is not idle)', async () => {
    const bare = await bareEndpoint({ sessionIdleMs: 200 });
    try {
      const sdk = await sdkClientFrom(bare.url, '127.0.0.1');
      // The SDK client opens its GET stream after initialize; give it time, then outwait the idle time.
      await new Promise((r) => setTimeout(r, 800));
      expect(bare.endpoint.sessionCount).toBe(1);
      expect((await sdk.client.listTools()).tools).toHaveLength(1);
      await sdk.client.close();
      sdk.agent.destroy();
      await waitUntil(
        () => bare.endpoint.sessionCount === 0,
        3000,
        'the session to expire once the client left',
      );
    } finally {
      await bare.close();
    }
  });

  it('rounds of new sessions leave the table, and the heap, flat', async () => {
    // The idle time outlasts a round's flood, so each round meets the full cap before expiry.
    const bare = await bareEndpoint({ sessionIdleMs: 1500, maxSessionsPerClient: 64 });
    try {
      const agent = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1', maxSockets: 16 });
      const heapAfterRound: number[] = [];
      for (let round = 0; round < 4; round++) {
        const replies = await flood(bare.url, agent, 100);
        expect(replies.filter((r) => r.status === 200)).toHaveLength(100);
        expect(bare.endpoint.sessionCount).toBe(64);
        await waitUntil(() => bare.endpoint.sessionCount === 0, 5000, `round ${round} to expire`);
        heapAfterRound.push(heapUsedAfterGc());
      }
      // No session survives its round, and nothing of them stays on the heap.
      expect(bare.endpoint.sessionsOf('127.0.0.1')).toBe(0);
      expect(heapAfterRound.at(-1)! - heapAfterRound[1]!).toBeLessThan(20 * 1024 * 1024);
      agent.destroy();
    } finally {
      await bare.close();
    }
  });

  it('refuses a client only when every session it holds is busy, and names why', async () => {
    const bare = await bareEndpoint({ sessionIdleMs: 60_000, maxSessionsPerClient: 3 });
    try {
      // Three connected SDK clients: each holds its notification stream open, so each is busy.
      const held = [];
      for (let i = 0; i < 3; i++) held.push(await sdkClientFrom(bare.url, '127.0.0.1'));
      await waitUntil(() => bare.endpoint.sessionsOf('127.0.0.1') === 3, 3000, 'three sessions of 127.0.0.1');
      const agent = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1' });
      const refused = await rawPost(bare.url, agent, INITIALIZE);
      expectTooManySessions(refused, '127.0.0.1');
      expect((JSON.parse(refused.body) as { error: { message: string } }).error.message).toMatch(
        /all 3 are in use/,
      );
      // One of them goes away (no DELETE): its session is idle now, and makes room.
      await held[0]!.client.close();
      held[0]!.agent.destroy();
      await waitUntil(
        async () => (await rawPost(bare.url, agent, INITIALIZE)).status === 200,
        3000,
        'a new session in place of the idle one',
      );
      for (const h of held.slice(1)) expect((await h.client.listTools()).tools).toHaveLength(1);
      for (const h of held.slice(1)) {
        await h.client.close();
        h.agent.destroy();
      }
      agent.destroy();
    } finally {
      await bare.close();
    }
  });

  it("at the global cap, a client makes room with its own idle session, never with another client's", async () => {
    const bare = await bareEndpoint({ sessionIdleMs: 60_000, maxSessionsPerClient: 10, maxSessions: 3 });
    try {
      const one = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1' });
      const two = new http.Agent({ keepAlive: true, localAddress: '127.0.0.2' });
      const three = new http.Agent({ keepAlive: true, localAddress: '127.0.0.3' });
      expect((await flood(bare.url, one, 2, 1)).map((r) => r.status)).toEqual([200, 200]);
      expect((await rawPost(bare.url, two, INITIALIZE)).status).toBe(200);
      // 127.0.0.2 replaces its own idle session; 127.0.0.3 holds none to give.
      expect((await rawPost(bare.url, two, INITIALIZE)).status).toBe(200);
      expect(bare.endpoint.sessionsOf('127.0.0.1')).toBe(2);
      const full = await rawPost(bare.url, three, INITIALIZE);
      expect(full.status).toBe(503);
      expect((JSON.parse(full.body) as { error: { message: string } }).error.message).toMatch(
        /maximum of 3 sessions/,
      );
      expect(bare.endpoint.sessionCount).toBe(3);
      for (const a of [one, two, three]) a.destroy();
    } finally {
      await bare.close();
    }
  });
});

describe("a worker's /mcp with a configured idle time", () => {
  let mesh: TestMesh;
  let worker: RunningWorker | undefined;

  beforeAll(async () => {
    mesh = await startTestMesh();
  });
  afterAll(async () => {
    await worker?.close(1000);
    await mesh?.close();
  });

  /** An echo worker on the test mesh, its `/mcp` with `sessions` settings. */
  const echoWorker = (name: string, sessions: McpSessionLimits = {}) =>
    startWorker({
      name,
      tags: ['echo'],
      handler: echoHandler,
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      port: 0,
      heartbeatSeconds: 1,
      mcpSessions: sessions,
    });

  it("counts the coordinator's links apart from the local clients on its address", async () => {
    const w = await echoWorker('apart-echo', { maxSessionsPerClient: 2 });
    const url = `${w.url}/mcp`;
    const name = await mesh.waitFor(
      () => mesh.http.mcp.listTools().find((t) => t.name.startsWith('apart-echo'))?.name,
      10_000,
      'the worker federated',
    );
    // Two local clients hold their notification streams open: the address's share is busy.
    const held = [await sdkClientFrom(url, '127.0.0.1'), await sdkClientFrom(url, '127.0.0.1')];
    await new Promise((r) => setTimeout(r, 500));
    const agent = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1' });
    try {
      expectTooManySessions(await rawPost(url, agent, INITIALIZE), '127.0.0.1');
      // The coordinator's requests carry its fingerprint: a share of their own on that address.
      const link = await rawPost(url, agent, INITIALIZE, { 'x-amf-coordinator-fingerprint': 'AA:BB' });
      expect(link.status).toBe(200);
      const result = await mesh.http.mcp.call(
        name,
        { text: 'through the link' },
        { caller: 'test', sessionId: null },
      );
      expect(result.isError).toBeFalsy();
      for (const h of held) expect((await h.client.listTools()).tools.length).toBeGreaterThan(0);
    } finally {
      for (const h of held) {
        await h.client.close();
        h.agent.destroy();
      }
      agent.destroy();
      await w.close(1000);
    }
  });

  it('expires a session it no longer hears from (404 on the next request)', async () => {
    const w = await echoWorker('idle-echo', { sessionIdleMs: 300 });
    worker = w;
    const { client, agent } = await sdkClientFrom(`${w.url}/mcp`, '127.0.0.1');
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    expect(result.content).toEqual([{ type: 'text', text: 'hi' }]);
    // A raw session beside it, which nobody uses after its initialize.
    const raw = await rawPost(`${w.url}/mcp`, agent, INITIALIZE);
    expect(raw.status).toBe(200);
    const ping = (id: number) =>
      rawPost(`${w.url}/mcp`, agent, JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' }), {
        'mcp-session-id': raw.sessionId!,
        'mcp-protocol-version': '2025-11-25',
      });
    expect((await ping(2)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1000));
    expect((await ping(3)).status).toBe(404);
    await client.close();
    agent.destroy();
  });

  it("keeps nothing of a long session's answered calls: the heap stays flat over thousands of tools/call", async () => {
    // The coordinator's link to a worker is one session for as long as both run. The SDK's JSON
    // answer mode kept every answered POST of a session (≈ 5 KB a call) until it ended.
    const w = await echoWorker('long-echo');
    const agent = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1', maxSockets: 8 });
    try {
      const opened = await rawPost(`${w.url}/mcp`, agent, INITIALIZE);
      expect(opened.status).toBe(200);
      const session = { 'mcp-session-id': opened.sessionId!, 'mcp-protocol-version': '2025-11-25' };
      expect(
        (
          await rawPost(
            `${w.url}/mcp`,
            agent,
            JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
            session,
          )
        ).status,
      ).toBe(202);
      let id = 10;
      let answered = 0;
      const calls = async (count: number) => {
        let left = count;
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            while (left-- > 0) {
              const n = id++;
              const reply = await rawPost(
                `${w.url}/mcp`,
                agent,
                JSON.stringify({
                  jsonrpc: '2.0',
                  id: n,
                  method: 'tools/call',
                  params: { name: 'echo', arguments: { text: `call ${n}` } },
                }),
                session,
              );
              if (reply.status === 200 && reply.body.includes(`call ${n}`)) answered++;
            }
          }),
        );
      };
      await calls(500); // warm-up: code compiled, pools filled
      // The test mesh's observer records every event on the fabric: not the worker's memory.
      mesh.events.length = 0;
      const before = heapUsedAfterGc();
      await calls(4000);
      mesh.events.length = 0;
      const growth = heapUsedAfterGc() - before;
      expect(answered).toBe(4500);
      // Kept per call, 4,000 calls would hold ≈ 20 MB.
      expect(growth).toBeLessThan(6 * 1024 * 1024);
    } finally {
      agent.destroy();
      await w.close(1000);
    }
  });
});
