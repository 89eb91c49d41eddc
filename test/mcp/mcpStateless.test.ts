/**
 * The stateless MCP revision 2026-07-28 on AMF's `/mcp`, with the official v2 client pinned to it:
 * the coordinator's federated catalog is listed and called without a session (policy and audit per
 * request), catalog changes reach a `subscriptions/listen` stream, a worker's own `/mcp` serves it
 * too, the revision's header rules are enforced, and session-based clients are unaffected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as SessionClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as SessionTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import type { McpAuditRecord } from '../../src/protocols/mcp/federation/audit.js';

const REVISION = '2026-07-28';
let mesh: TestMesh;

beforeAll(async () => {
  mesh = await startTestMesh();
}, 30_000);
afterAll(async () => {
  await mesh?.close();
});

/** A v2 client that speaks only 2026-07-28 (a pin has no fallback to the session revisions). */
async function connectModern(url: string): Promise<Client> {
  const client = new Client(
    { name: 'amf-test-modern', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: REVISION } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

function text(result: { content?: unknown }): string {
  const content = (result.content ?? []) as Array<{ type: string; text?: string }>;
  return content.map((c) => (c.type === 'text' ? (c.text ?? '') : '')).join('');
}

async function audit(): Promise<McpAuditRecord[]> {
  const res = await mesh.fetch('/audit?limit=50');
  expect(res.status).toBe(200);
  return ((await res.json()) as { records: McpAuditRecord[] }).records;
}

/** Lists tools until `name` appears (the federation lists an agent once it is admitted). */
async function waitForTool(client: Client, name: string): Promise<string[]> {
  for (;;) {
    const names = (await client.listTools()).tools.map((t) => t.name);
    if (names.includes(name)) return names;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A raw 2026-07-28 request; `omit` drops one of the headers the revision requires. */
function rawModern(url: string, method: string, params: Record<string, unknown>, omit?: string) {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': REVISION,
    'mcp-method': method,
  };
  if (method === 'tools/call') headers['mcp-name'] = String(params.name);
  if (omit) delete headers[omit];
  const meta = {
    'io.modelcontextprotocol/protocolVersion': REVISION,
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  return fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: meta } }),
  });
}

describe('coordinator /mcp at 2026-07-28', () => {
  it('lists the federated tools and calls <agent>__echo without a session; the call is audited', async () => {
    const w = await mesh.startWorker('mcp-modern-1', ['echo'], echoHandler);
    const client = await connectModern(`${mesh.url}/mcp`);
    try {
      expect(client.getProtocolEra()).toBe('modern');
      const names = await waitForTool(client, 'mcp-modern-1__echo');
      expect(names).toContain('mcp-modern-1__echo');
      const result = await client.callTool({
        name: 'mcp-modern-1__echo',
        arguments: { text: 'stateless hello' },
      });
      expect(result.isError).toBeFalsy();
      expect(text(result)).toContain('stateless hello');
      const records = await audit();
      const record = records.find(
        (r) => r.wire_name === 'mcp-modern-1__echo' && r.outcome === 'ok' && r.session_id === null,
      );
      expect(record, JSON.stringify(records)).toBeDefined();
      expect(record!).toMatchObject({ decision: 'allow', agent_id: w.worker.agentId, caller: '127.0.0.1' });
      // An unknown tool is a JSON-RPC invalid-params error, audited as a denial.
      await expect(client.callTool({ name: 'nobody__nothing', arguments: {} })).rejects.toThrow(/not found/);
      expect((await audit()).some((r) => r.wire_name === 'nobody__nothing' && r.outcome === 'denied')).toBe(
        true,
      );
    } finally {
      await client.close();
      await w.close(1000);
    }
  });

  it('relays the progress of a forwarded call on the request stream', async () => {
    const stepper: WorkerHandler = {
      name: 'stepper_main',
      description: 'a worker with a tool that reports progress',
      handle: () => Promise.resolve('ok'),
      mcp: {
        tools: [
          {
            definition: {
              name: 'steps',
              description: 'reports three steps',
              inputSchema: { type: 'object' },
            },
            async call(_args, ctx) {
              for (let i = 1; i <= 3; i++) await ctx.progress(i, 3, `step ${i}`);
              return { content: [{ type: 'text', text: 'stepped' }] };
            },
          },
        ],
      },
    };
    const w = await mesh.startWorker('mcp-modern-progress', ['stepper'], stepper);
    const client = await connectModern(`${mesh.url}/mcp`);
    try {
      const names = await waitForTool(client, 'mcp-modern-progress__steps');
      expect(names).toContain('mcp-modern-progress__steps');
      const seen: Array<[number, number | undefined, string | undefined]> = [];
      const result = await client.callTool(
        { name: 'mcp-modern-progress__steps', arguments: {} },
        {
          onprogress: (p) => seen.push([p.progress, p.total, p.message]),
        },
      );
      expect(text(result)).toBe('stepped');
      expect(seen).toEqual([
        [1, 3, 'step 1'],
        [2, 3, 'step 2'],
        [3, 3, 'step 3'],
      ]);
      // And straight at the worker's own stateless leg.
      const direct = await connectModern(`${w.url}/mcp`);
      try {
        const own: number[] = [];
        await direct.callTool({ name: 'steps', arguments: {} }, { onprogress: (p) => own.push(p.progress) });
        expect(own).toEqual([1, 2, 3]);
      } finally {
        await direct.close();
      }
    } finally {
      await client.close();
    }
  });

  it('tells a subscriptions/listen stream when the catalog changes', async () => {
    const client = await connectModern(`${mesh.url}/mcp`);
    let onChange: (() => void) | undefined;
    client.setNotificationHandler('notifications/tools/list_changed', () => onChange?.());
    const subscription = await client.listen({ toolsListChanged: true });
    try {
      expect(subscription.honoredFilter.toolsListChanged).toBe(true);
      const changed = new Promise<void>((resolve) => (onChange = resolve));
      const w = await mesh.startWorker('mcp-modern-2', ['echo'], echoHandler);
      try {
        await changed;
        expect((await client.listTools()).tools.map((t) => t.name)).toContain('mcp-modern-2__echo');
      } finally {
        await w.close(1000);
      }
    } finally {
      await subscription.close();
      await client.close();
    }
  });

  it('answers a request missing a required header with 400 naming the header (-32020)', async () => {
    const res = await rawModern(`${mesh.url}/mcp`, 'tools/list', {}, 'mcp-method');
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: number; message: string } };
    expect(body.error.code).toBe(-32020);
    expect(body.error.message).toMatch(/Mcp-Method/i);
    expect(res.headers.get('mcp-session-id')).toBeNull();
  });

  it('rejects an unsupported revision with -32022 and keeps the Origin check', async () => {
    const res = await fetch(`${mesh.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '1900-01-01',
        'mcp-method': 'tools/list',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/list',
        params: {
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '1900-01-01',
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: number; data: { supported: string[] } } };
    expect(body.error.code).toBe(-32022);
    expect(body.error.data.supported).toContain(REVISION);
    // The same request at the served revision: one JSON body, no session.
    const ok = await rawModern(`${mesh.url}/mcp`, 'tools/list', {});
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toMatch(/^application\/json/);
    expect(ok.headers.get('mcp-session-id')).toBeNull();
    expect(((await ok.json()) as { result: { tools: unknown[] } }).result.tools).toBeInstanceOf(Array);
    const forbidden = await fetch(`${mesh.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        origin: 'http://evil.example',
        'mcp-protocol-version': REVISION,
        'mcp-method': 'tools/list',
      },
      body: '{}',
    });
    expect(forbidden.status).toBe(403);
  });

  it('still serves session-based clients (1.32.2) on the same endpoint', async () => {
    const client = new SessionClient({ name: 'amf-test-session', version: '1.0.0' });
    const transport = new SessionTransport(new URL(`${mesh.url}/mcp`));
    await client.connect(transport);
    try {
      expect(transport.sessionId).toBeTruthy();
      expect(Array.isArray((await client.listTools()).tools)).toBe(true);
    } finally {
      await client.close();
    }
  });
});

describe('worker /mcp at 2026-07-28', () => {
  it('serves its handler as tool echo to a pinned v2 client', async () => {
    const w = await mesh.startWorker('mcp-modern-w', ['echo'], echoHandler);
    const client = await connectModern(`${w.url}/mcp`);
    try {
      expect(client.getProtocolEra()).toBe('modern');
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['echo']);
      const result = await client.callTool({ name: 'echo', arguments: { text: 'worker modern' } });
      expect(result.isError).toBeFalsy();
      expect(text(result)).toContain('worker modern');
      const missing = await client.callTool({ name: 'echo', arguments: {} });
      expect(missing.isError).toBe(true);
    } finally {
      await client.close();
      await w.close(1000);
    }
  });
});
