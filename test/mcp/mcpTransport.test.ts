/**
 * Streamable HTTP details of both `/mcp` endpoints (coordinator and worker) with raw fetch and the
 * official SDK client: sessions (Mcp-Session-Id, 404 once ended), protocol versions 2025-11-25,
 * 2025-06-18 and 2025-03-26, `MCP-Protocol-Version` validation, `Origin` validation; plus tool
 * aliases, AMF_MCP_REQUIRE_TLS admission and `amf audit`.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { originAllowed } from '../../src/protocols/mcp/endpoint/endpoint.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
let mesh: TestMesh;
let worker: RunningWorker;

beforeAll(async () => {
  mesh = await startTestMesh();
  worker = await mesh.startWorker('mcp-transport', ['echo'], echoHandler);
}, 30_000);
afterAll(async () => {
  await mesh?.close();
});

const ACCEPT = 'application/json, text/event-stream';

/** POSTs one JSON-RPC message; returns status, headers and the JSON-RPC reply (from JSON or SSE). */
async function post(
  url: string,
  message: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> | undefined }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
    body: JSON.stringify(message),
  });
  const text = await res.text();
  let body: Record<string, unknown> | undefined;
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const data = text
      .split('\n')
      .filter((l) => l.startsWith('data:') && l.length > 5)
      .map((l) => l.slice(5).trim());
    body = data.length > 0 ? (JSON.parse(data[data.length - 1]!) as Record<string, unknown>) : undefined;
  } else if (text) body = JSON.parse(text) as Record<string, unknown>;
  return { status: res.status, headers: res.headers, body };
}

function initialize(version: string) {
  return {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw-fetch', version: '1' } },
  };
}

/** Initializes a raw session at `version`; returns the session id. */
async function rawSession(url: string, version: string): Promise<string> {
  const init = await post(url, initialize(version));
  expect(init.status).toBe(200);
  expect((init.body!.result as { protocolVersion: string }).protocolVersion).toBe(version);
  const sid = init.headers.get('mcp-session-id');
  expect(sid).toMatch(/^[\x21-\x7e]+$/);
  const ack = await post(
    url,
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { 'mcp-session-id': sid!, 'mcp-protocol-version': version },
  );
  expect(ack.status).toBe(202);
  return sid!;
}

for (const which of ['coordinator', 'worker'] as const) {
  describe(`${which} /mcp transport`, () => {
    const url = () => (which === 'coordinator' ? `${mesh.url}/mcp` : `${worker.url}/mcp`);

    for (const version of ['2025-11-25', '2025-06-18', '2025-03-26']) {
      it(`negotiates ${version} and lists tools in a session`, async () => {
        const sid = await rawSession(url(), version);
        const list = await post(
          url(),
          { jsonrpc: '2.0', id: 2, method: 'tools/list' },
          { 'mcp-session-id': sid, 'mcp-protocol-version': version },
        );
        expect(list.status).toBe(200);
        expect(Array.isArray((list.body!.result as { tools: unknown[] }).tools)).toBe(true);
      });
    }

    it('a 2025-03-26 client may omit MCP-Protocol-Version; an unsupported one is 400', async () => {
      const sid = await rawSession(url(), '2025-03-26');
      const without = await post(url(), { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': sid });
      expect(without.status).toBe(200);
      const bad = await post(
        url(),
        { jsonrpc: '2.0', id: 3, method: 'ping' },
        { 'mcp-session-id': sid, 'mcp-protocol-version': '1999-01-01' },
      );
      expect(bad.status).toBe(400);
    });

    it('unknown and ended sessions are 404; no session is 400', async () => {
      const unknown = await post(
        url(),
        { jsonrpc: '2.0', id: 1, method: 'ping' },
        { 'mcp-session-id': 'nope' },
      );
      expect(unknown.status).toBe(404);
      const none = await post(url(), { jsonrpc: '2.0', id: 1, method: 'ping' });
      expect(none.status).toBe(400);
      const sid = await rawSession(url(), '2025-11-25');
      const del = await fetch(url(), {
        method: 'DELETE',
        headers: { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' },
      });
      expect(del.status).toBe(200);
      const after = await post(
        url(),
        { jsonrpc: '2.0', id: 2, method: 'ping' },
        { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' },
      );
      expect(after.status).toBe(404);
    });

    it('rejects a foreign Origin with 403 and accepts localhost and absent Origins', async () => {
      const foreign = await post(url(), initialize('2025-11-25'), { origin: 'https://evil.example' });
      expect(foreign.status).toBe(403);
      const local = await post(url(), initialize('2025-11-25'), { origin: 'http://localhost:5173' });
      expect(local.status).toBe(200);
    });

    it('the official SDK client (2025-11-25) connects, pings and lists', async () => {
      const client = new Client({ name: 'sdk', version: '1' });
      const transport = new StreamableHTTPClientTransport(new URL(url()));
      await client.connect(transport);
      expect(transport.sessionId).toBeTruthy();
      expect(transport.protocolVersion).toBe('2025-11-25');
      await client.ping();
      await client.listTools();
      await transport.terminateSession();
      await client.close();
    });
  });
}

it('Origin rule', () => {
  expect(originAllowed(undefined)).toBe(true);
  expect(originAllowed('http://127.0.0.1:3000')).toBe(true);
  expect(originAllowed('http://[::1]')).toBe(true);
  expect(originAllowed('https://localhost.evil.example')).toBe(false);
  expect(originAllowed('http://127.evil.example')).toBe(false);
  expect(originAllowed('http://127.0.0.2:8080')).toBe(true);
  expect(originAllowed('http://app.localhost')).toBe(true);
  expect(originAllowed('null')).toBe(false);
  expect(originAllowed('https://ide.example', ['https://ide.example'])).toBe(true);
});

describe('tool aliases', () => {
  async function aliased(name: string, alias: string): Promise<RunningWorker> {
    const w = await startWorker({
      name,
      tags: ['echo'],
      handler: echoHandler,
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      port: 0,
      heartbeatSeconds: 1,
      toolAlias: alias,
    });
    await mesh.waitFor(() => mesh.coordinator.registry.isLive(w.worker.agentId), 10_000, `${name} admitted`);
    return w;
  }
  const names = () => mesh.http.mcp.listTools().map((t) => t.name);

  it('first come first served; a collision rejects both aliases and warns', async () => {
    const solo = await aliased('alias-solo', 'short');
    const a = await aliased('alias-a', 'dup');
    try {
      await mesh.waitFor(
        () => names().includes('short__echo') && names().includes('dup__echo'),
        10_000,
        'aliases granted',
      );
      expect(names()).not.toContain('alias-solo__echo');
      const b = await aliased('alias-b', 'dup');
      try {
        const warning = await mesh.waitForEvent(
          (e) =>
            e.event.type === 'amf.policy.warning' &&
            (e.event.data.payload as { reason?: string }).reason === 'tool_alias_collision',
          10_000,
          'tool_alias_collision',
        );
        expect((warning.event.data.payload as { details: { agents: string[] } }).details.agents).toEqual([
          a.worker.agentId,
          b.worker.agentId,
        ]);
        await mesh.waitFor(
          () => names().includes('alias-a__echo') && names().includes('alias-b__echo'),
          10_000,
          'both fall back to namespaced names',
        );
        expect(names()).not.toContain('dup__echo');
        expect(names()).toContain('short__echo');
      } finally {
        await b.close(1000);
      }
    } finally {
      await Promise.all([solo.close(1000), a.close(1000)]);
    }
  }, 40_000);
});

describe('AMF_MCP_REQUIRE_TLS', () => {
  it('refuses admission to a worker whose MCP endpoint is http:// (plaintext_mcp_refused)', async () => {
    const strict = await startTestMesh({ config: { mcp: { requireTls: true } } });
    try {
      const w = await startWorker({
        name: 'plain-mcp',
        tags: ['echo'],
        handler: echoHandler,
        natsUrl: strict.coordinator.natsUrl,
        credential: strict.coordinator.credentials.specialist,
        port: 0,
        heartbeatSeconds: 1,
      });
      try {
        const deny = await strict.waitForEvent(
          (e) =>
            e.event.type === 'amf.policy.deny' &&
            JSON.stringify(e.event.data.payload).includes('plaintext_mcp_refused'),
          10_000,
          'plaintext_mcp_refused',
        );
        expect((deny.event.data.payload as { agent_id?: string }).agent_id).toBe(w.worker.agentId);
        expect(strict.coordinator.registry.isLive(w.worker.agentId)).toBe(false);
      } finally {
        await w.close(1000);
      }
    } finally {
      await strict.close();
    }
  }, 30_000);
});

describe('amf audit', () => {
  it('prints the newest records first and honours --limit', async () => {
    const client = new Client({ name: 'audit', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`)));
    try {
      await mesh.waitFor(() => mesh.http.mcp.catalog().has('mcp-transport__echo'), 10_000, 'tool listed');
      await client.callTool({ name: 'mcp-transport__echo', arguments: { text: 'one' } });
      await client.callTool({ name: 'mcp-transport__nope', arguments: {} }).catch(() => undefined);
    } finally {
      await client.close();
    }
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        // The mesh's data dir: the CLI reads the operator key from it, nothing is passed by hand.
        [
          join(ROOT, 'bin/amf.js'),
          'audit',
          '--limit',
          '2',
          '--json',
          '--coordinator',
          mesh.url,
          '--data-dir',
          mesh.config.dataDir,
        ],
        // Generous: a cold CLI start on a shared, busy CI machine can take many seconds.
        { timeout: 60_000 },
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      ),
    );
    expect(run.code, run.stderr).toBe(0);
    const records = (JSON.parse(run.stdout) as { records: Array<{ wire_name: string; outcome: string }> })
      .records;
    expect(records.map((r) => [r.wire_name, r.outcome])).toEqual([
      ['mcp-transport__nope', 'denied'],
      ['mcp-transport__echo', 'ok'],
    ]);
    const bad = await mesh.fetch('/audit?limit=0');
    expect(bad.status).toBe(400);
  }, 90_000);
});
