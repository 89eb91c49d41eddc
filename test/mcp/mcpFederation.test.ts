/**
 * The MCP server side end to end: a worker serves its handler as an MCP tool, the coordinator's
 * federated `/mcp` lists it under its namespaced wire name while the agent is admitted, forwards
 * calls with an OPA decision, warns on plaintext calls and audits every call.
 */
import { amfCardBlock } from '../../src/util/amfCardBlock.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import type { McpAuditRecord } from '../../src/protocols/mcp/federation/audit.js';

let mesh: TestMesh;

beforeAll(async () => {
  // The edge body cap (http.max_body_bytes, 1 MiB by default) is raised above the policy's argument
  // limit so that the policy's own arguments_too_large rule can be shown.
  mesh = await startTestMesh({ config: { http: { maxBodyBytes: 4 * 1024 * 1024 } } });
}, 30_000);
afterAll(async () => {
  await mesh?.close();
});

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: 'amf-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

function text(result: unknown): string {
  const r = result as CallToolResult;
  return r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
}

async function audit(limit = 50): Promise<McpAuditRecord[]> {
  const res = await mesh.fetch(`/audit?limit=${limit}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { records: McpAuditRecord[] }).records;
}

describe('worker /mcp', () => {
  it('serves its handler as tool echo with argument text, announced in card and record', async () => {
    const w = await mesh.startWorker('mcp-echo-a', ['echo'], echoHandler);
    const record = w.worker.agentRecord();
    expect(record.mcp_endpoint).toBe(`${w.url}/mcp`);
    expect(record.protocols_supported).toContain('MCP/2025-11-25');
    const card: unknown = await (await fetch(`${w.url}/.well-known/agent-card.json`)).json();
    expect(amfCardBlock(card)?.mcp_endpoint).toBe(`${w.url}/mcp`);
    const client = await connect(`${w.url}/mcp`);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(['echo']);
      expect(tools[0]!.inputSchema).toMatchObject({ type: 'object', required: ['text'] });
      const result = await client.callTool({ name: 'echo', arguments: { text: 'hello mcp' } });
      expect(result.isError).toBeFalsy();
      expect(text(result)).toContain('hello mcp');
    } finally {
      await client.close();
      await w.close(1000);
    }
  });

  it('uses a handler-declared inputSchema', async () => {
    const handler: WorkerHandler = {
      name: 'sum',
      description: 'adds a and b',
      inputSchema: {
        type: 'object',
        properties: { a: { type: 'number' }, b: { type: 'number' } },
        required: ['a', 'b'],
      },
      handle: (ctx) => Promise.resolve(String((ctx.input!.a as number) + (ctx.input!.b as number))),
    };
    const w = await mesh.startWorker('mcp-sum', ['sum'], handler);
    const client = await connect(`${w.url}/mcp`);
    try {
      const { tools } = await client.listTools();
      expect(tools[0]).toMatchObject({ name: 'sum', inputSchema: { required: ['a', 'b'] } });
      expect(text(await client.callTool({ name: 'sum', arguments: { a: 2, b: 40 } }))).toBe('42');
    } finally {
      await client.close();
      await w.close(1000);
    }
  });
});

describe('coordinator /mcp (federated)', () => {
  it('a tool appears when its agent is admitted and disappears when it leaves (list_changed)', async () => {
    const client = await connect(`${mesh.url}/mcp`);
    let changes = 0;
    let onChange: (() => void) | undefined;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changes++;
      onChange?.();
    });
    const changed = () => new Promise<void>((resolve) => (onChange = resolve));
    try {
      const before = (await client.listTools()).tools.map((t) => t.name);
      expect(before).not.toContain('mcp-fed-1__echo');
      let next = changed();
      const w = await mesh.startWorker('mcp-fed-1', ['echo'], echoHandler);
      await next;
      const listed = await client.listTools();
      const tool = listed.tools.find((t) => t.name === 'mcp-fed-1__echo');
      expect(tool, JSON.stringify(listed.tools.map((t) => t.name))).toBeDefined();
      expect(tool!.description).toContain(`[${w.worker.agentId}/echo]`);
      const result = await client.callTool({
        name: 'mcp-fed-1__echo',
        arguments: { text: 'via federation' },
      });
      expect(result.isError).toBeFalsy();
      expect(text(result)).toContain('via federation');
      // Plaintext agent endpoint: a warning on every call.
      await mesh.waitForEvent(
        (e) =>
          e.event.type === 'amf.policy.warning' &&
          (e.event.data.payload as { reason?: string }).reason === 'mcp_call_unauthenticated' &&
          (e.event.data.payload as { agent_id?: string }).agent_id === w.worker.agentId,
        5000,
        'mcp_call_unauthenticated',
      );
      await client.callTool({ name: 'mcp-fed-1__echo', arguments: { text: 'second' } });
      await mesh.waitFor(
        () =>
          mesh.events.filter(
            (e) =>
              (e.event.data.payload as { reason?: string }).reason === 'mcp_call_unauthenticated' &&
              (e.event.data.payload as { agent_id?: string }).agent_id === w.worker.agentId,
          ).length >= 2,
        5000,
        'a warning per call',
      );
      const records = await audit(10);
      const ok = records.find((r) => r.wire_name === 'mcp-fed-1__echo' && r.outcome === 'ok');
      expect(ok).toMatchObject({
        agent_id: w.worker.agentId,
        tool: `${w.worker.agentId}/echo`,
        decision: 'allow',
        auth: 'bearer',
      });
      expect(ok!.duration_ms).toBeGreaterThanOrEqual(0);
      next = changed();
      await w.close(1000);
      await next;
      expect((await client.listTools()).tools.map((t) => t.name)).not.toContain('mcp-fed-1__echo');
      expect(changes).toBeGreaterThanOrEqual(2);
    } finally {
      await client.close();
    }
  }, 30_000);

  it('a call the policy denies returns an isError result and is audited', async () => {
    const denied: WorkerHandler = {
      ...echoHandler,
      name: 'amf_denied_tool',
      description: 'on the deny list',
    };
    const w = await mesh.startWorker('mcp-deny', ['deny'], denied);
    const client = await connect(`${mesh.url}/mcp`);
    try {
      await mesh.waitFor(
        async () => (await client.listTools()).tools.some((t) => t.name === 'mcp-deny__amf_denied_tool'),
        10_000,
        'denied tool listed',
      );
      const result = (await client.callTool({
        name: 'mcp-deny__amf_denied_tool',
        arguments: { text: 'x' },
      })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(text(result)).toMatch(/denied.*tool_denied/);
      expect(result._meta).toMatchObject({ 'amf/policy': { decision: 'deny', reasons: ['tool_denied'] } });
      // Arguments above data.policy.mcp.max_argument_bytes (1 MiB) are denied too.
      const big = (await client
        .callTool({
          name: 'mcp-fed-absent__echo',
          arguments: { text: 'x' },
        })
        .catch((e: unknown) => e)) as Error;
      expect(big.message).toMatch(/not found/);
      const records = await audit(10);
      expect(records.find((r) => r.wire_name === 'mcp-deny__amf_denied_tool')).toMatchObject({
        decision: 'deny',
        reasons: ['tool_denied'],
        outcome: 'denied',
        agent_id: w.worker.agentId,
      });
      expect(records.find((r) => r.wire_name === 'mcp-fed-absent__echo')).toMatchObject({
        decision: 'deny',
        reasons: ['unknown_tool'],
      });
      // Newest first.
      const times = records.map((r) => r.time);
      expect([...times].sort().reverse()).toEqual(times);
    } finally {
      await client.close();
      await w.close(1000);
    }
  }, 30_000);

  it('arguments above the policy limit are denied', async () => {
    const w = await mesh.startWorker('mcp-big', ['big'], echoHandler);
    const client = await connect(`${mesh.url}/mcp`);
    try {
      await mesh.waitFor(
        async () => (await client.listTools()).tools.some((t) => t.name === 'mcp-big__echo'),
        10_000,
        'tool listed',
      );
      const result = (await client.callTool({
        name: 'mcp-big__echo',
        arguments: { text: 'x'.repeat(1024 * 1024 + 10) },
      })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(result._meta).toMatchObject({ 'amf/policy': { reasons: ['arguments_too_large'] } });
    } finally {
      await client.close();
      await w.close(1000);
    }
  }, 30_000);
});
