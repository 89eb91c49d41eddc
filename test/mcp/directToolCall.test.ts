/**
 * The federation's direct `tools/call` (protocols/mcp/federation/directToolCall.ts) against a real
 * MCP endpoint on node:http: the result in the shared client's session, over SSE and JSON answers,
 * the agent's own errors as McpError, the time limit, and a session the agent ended (404) closing
 * the client.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { McpEndpoint } from '../../src/protocols/mcp/endpoint/endpoint.js';
import {
  createAgentFetch,
  NO_CALL_CREDENTIALS,
  type AgentFetch,
} from '../../src/protocols/mcp/federation/callAuth.js';
import { callToolDirect } from '../../src/protocols/mcp/federation/directToolCall.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The agent's tools: `echo`, `fail` (a JSON-RPC error) and `hang` (answers when the client leaves). */
function agentServer(): Server {
  const server = new Server({ name: 'agent', version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: ['echo', 'fail', 'hang'].map((name) => ({ name, inputSchema: { type: 'object' as const } })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name, arguments: args } = request.params;
    if (name === 'fail') throw new McpError(ErrorCode.InvalidParams, 'no such thing', { why: 'test' });
    if (name === 'hang')
      await new Promise((resolve) => extra.signal.addEventListener('abort', resolve, { once: true }));
    return { content: [{ type: 'text' as const, text: `echo: ${String(args?.text)}` }] };
  });
  return server;
}

/**
 * The agent on node:http. `sse`: AMF's own endpoint (SSE answers). `json`: one session on the SDK's
 * transport in its JSON answer mode, as other MCP servers answer (AMF's endpoint no longer uses that
 * mode: protocols/mcp/endpoint/endpoint.ts says why).
 */
async function agent(answers: 'sse' | 'json'): Promise<{ url: string }> {
  let handle: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>;
  let closeAgent: () => Promise<void>;
  if (answers === 'sse') {
    const endpoint = new McpEndpoint({ createServer: agentServer });
    handle = (req, res) => endpoint.handle(req, res);
    closeAgent = () => endpoint.close();
  } else {
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
    });
    const server = agentServer();
    await server.connect(transport);
    handle = (req, res) => transport.handleRequest(req, res);
    closeAgent = () => server.close();
  }
  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    await closeAgent();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp` };
}

async function sharedClient(url: string): Promise<{ client: Client; fetch: AgentFetch }> {
  const fetch = createAgentFetch({
    agentId: 'spiffe://local/worker/a',
    endpoint: url,
    credentials: NO_CALL_CREDENTIALS,
  });
  const client = new Client({ name: 'amf-coordinator', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: fetch.fetch }));
  cleanups.push(async () => {
    await client.close();
    fetch.close();
  });
  return { client, fetch };
}

const text = (r: CallToolResult | undefined) =>
  r?.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('callToolDirect', () => {
  for (const answers of ['sse', 'json'] as const) {
    it(`returns the agent's result and its JSON-RPC errors (${answers.toUpperCase()} answers)`, async () => {
      const { url } = await agent(answers);
      const { client, fetch } = await sharedClient(url);
      const call = { client, fetch, endpoint: url, timeoutMs: 10_000 };
      expect(text(await callToolDirect({ ...call, tool: 'echo', args: { text: 'hi' } }))).toBe('echo: hi');
      const err = await callToolDirect({ ...call, tool: 'fail', args: {} }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(ErrorCode.InvalidParams);
      expect((err as McpError).data).toEqual({ why: 'test' });
    });
  }

  it('gives up at the time limit with a RequestTimeout error', async () => {
    const { url } = await agent('json');
    const { client, fetch } = await sharedClient(url);
    const err = await callToolDirect({
      client,
      fetch,
      endpoint: url,
      tool: 'hang',
      args: {},
      timeoutMs: 200,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(ErrorCode.RequestTimeout);
  });

  it('closes the shared client when the agent ended its session (404): the federation then connects anew', async () => {
    const { url } = await agent('sse');
    const { client, fetch } = await sharedClient(url);
    const transport = client.transport as StreamableHTTPClientTransport;
    const closed = new Promise<void>((resolve) => (client.onclose = resolve));
    const ended = await globalThis.fetch(url, {
      method: 'DELETE',
      headers: { 'mcp-session-id': transport.sessionId!, 'mcp-protocol-version': transport.protocolVersion! },
    });
    expect(ended.status).toBe(200);
    const err = await callToolDirect({
      client,
      fetch,
      endpoint: url,
      tool: 'echo',
      args: {},
      timeoutMs: 10_000,
    }).catch((e: unknown) => e);
    expect(String(err)).toContain('HTTP 404');
    await closed;
    expect(client.transport).toBeUndefined();
  });

  it('leaves a client without a session to the SDK path', async () => {
    const { url } = await agent('sse');
    const fetch = createAgentFetch({ agentId: 'a', endpoint: url, credentials: NO_CALL_CREDENTIALS });
    cleanups.push(() => Promise.resolve(fetch.close()));
    const client = new Client({ name: 'not-connected', version: '1' });
    expect(
      await callToolDirect({ client, fetch, endpoint: url, tool: 'echo', args: {}, timeoutMs: 1000 }),
    ).toBeUndefined();
  });
});
