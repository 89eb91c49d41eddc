/**
 * The fast path of a plain federated `tools/call` on a live session of the coordinator's `/mcp`
 * (issue 14): answered as one JSON body without the SDK server transport and forwarded without the
 * SDK client's request machinery, with the same result, errors and audit as the SDK path, which
 * still serves every call that asks for more (here: progress).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { McpAuditRecord } from '../../src/protocols/mcp/federation/audit.js';

let mesh: TestMesh;
let client: Client;
let transport: StreamableHTTPClientTransport;
const TOOL = 'mcp-fast__echo';

beforeAll(async () => {
  mesh = await startTestMesh();
  await mesh.startWorker('mcp-fast', ['echo'], echoHandler);
  client = new Client({ name: 'amf-test', version: '1.0.0' });
  transport = new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`));
  await client.connect(transport);
  await mesh.waitFor(async () => (await client.listTools()).tools.some((t) => t.name === TOOL));
}, 60_000);
afterAll(async () => {
  await client?.close();
  await mesh?.close();
});

/** One raw POST in the SDK client's session: the content type and the JSON-RPC response. */
async function post(message: object): Promise<{ type: string; response: Record<string, unknown> }> {
  const res = await fetch(`${mesh.url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-session-id': transport.sessionId!,
      'mcp-protocol-version': transport.protocolVersion!,
    },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
  expect(res.status).toBe(200);
  const type = res.headers.get('content-type') ?? '';
  const text = await res.text();
  const payload = type.startsWith('text/event-stream')
    ? text
        .split('\n')
        // A priming event (SEP-1699) carries an id and empty data.
        .filter((l) => l.startsWith('data: ') && l.length > 6)
        .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>)
        .find((m) => 'result' in m || 'error' in m)!
    : (JSON.parse(text) as Record<string, unknown>);
  return { type, response: payload };
}

function text(result: unknown): string {
  return (result as CallToolResult).content.map((c) => (c.type === 'text' ? c.text : '')).join('');
}

describe('coordinator /mcp fast path', () => {
  it('answers a plain tools/call with one JSON body carrying the agent result, and audits it', async () => {
    const { type, response } = await post({
      id: 'fast-1',
      method: 'tools/call',
      params: { name: TOOL, arguments: { text: 'fast hello' } },
    });
    expect(type).toMatch(/^application\/json/);
    expect(response.id).toBe('fast-1');
    expect(text(response.result)).toContain('fast hello');
    await mesh.waitFor(async () => {
      const res = await mesh.fetch('/audit?limit=50');
      const { records } = (await res.json()) as { records: McpAuditRecord[] };
      return records.some((r) => r.wire_name === TOOL && r.outcome === 'ok' && r.decision === 'allow');
    });
  });

  it('leaves a call asking for progress to the SDK path (an SSE stream), with the same result', async () => {
    const { type, response } = await post({
      id: 7,
      method: 'tools/call',
      params: { name: TOOL, arguments: { text: 'slow hello' }, _meta: { progressToken: 'p-1' } },
    });
    expect(type).toMatch(/^text\/event-stream/);
    expect(response.id).toBe(7);
    expect(text(response.result)).toContain('slow hello');
  });

  it('reports an unknown tool with the same JSON-RPC error on both paths', async () => {
    const fast = await post({ id: 1, method: 'tools/call', params: { name: 'nobody__echo' } });
    const sdk = await post({
      id: 2,
      method: 'tools/call',
      params: { name: 'nobody__echo', _meta: { progressToken: 'p-2' } },
    });
    expect(fast.type).toMatch(/^application\/json/);
    expect(sdk.type).toMatch(/^text\/event-stream/);
    expect(fast.response.error).toEqual(sdk.response.error);
    expect((fast.response.error as { code: number }).code).toBe(-32602);
  });

  it('serves many concurrent calls of one session through the official client', async () => {
    const texts = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        client.callTool({ name: TOOL, arguments: { text: `n${i}` } }).then(text),
      ),
    );
    texts.forEach((t, i) => expect(t).toContain(`n${i}`));
  });
});
