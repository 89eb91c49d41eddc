/**
 * Client capabilities negotiated end to end through the coordinator's `/mcp`, with the official
 * SDK client: a tool that needs sampling or elicitation fails at once, with an error that names
 * the capability, for a caller that did not declare it (on the worker directly and through the
 * coordinator, for an AMF worker and for a third-party MCP server that asks anyway); a caller that
 * declared sampling alone gets its sampling tool answered, and one that declared elicitation alone
 * its elicitation tool; the caller's roots reach an agent that asks for them.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  CreateMessageResultSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  ListRootsResultSchema,
  McpError,
  type CallToolResult,
  type ClientCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { MeshWorker } from '../../src/worker/meshWorker.js';
import { MCP_PROTOCOL } from '../../src/protocols/mcp/endpoint/endpoint.js';
// @ts-expect-error: an example handler module without types
import conformanceHandler from '../fixtures/mcpConformanceBase.mjs';

let mesh: TestMesh;
let worker: RunningWorker;
let thirdParty: { url: string; close(): Promise<void> };
let thirdPartyAgent: MeshWorker;

/**
 * An MCP server of the official SDK that asks the client for sampling and roots whatever the
 * client declared (as many third-party servers do): the coordinator must not let that hang.
 */
async function startAskingServer(): Promise<{ url: string; close(): Promise<void> }> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const build = () => {
    const server = new McpServer({ name: 'asking', version: '1' });
    server.registerTool('ask_model', { description: 'asks the client model' }, async (extra) => {
      const answer = await extra.sendRequest(
        {
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], maxTokens: 10 },
        },
        CreateMessageResultSchema,
      );
      return { content: [{ type: 'text', text: `model said ${JSON.stringify(answer.content)}` }] };
    });
    server.registerTool('ask_roots', { description: 'asks the client its roots' }, async (extra) => {
      const answer = await extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema);
      return { content: [{ type: 'text', text: answer.roots.map((r) => r.uri).join(',') }] };
    });
    return server;
  };
  const httpServer = http.createServer((req, res) => {
    void (async () => {
      // A plain A2A card at the advertised place, so admission can check the agent against it.
      if (req.method === 'GET' && req.url === '/.well-known/agent-card.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ name: 'asking', description: 'asks its clients', version: '1.0.0' }));
        return;
      }
      const sid = req.headers['mcp-session-id'];
      let transport = typeof sid === 'string' ? transports.get(sid) : undefined;
      if (!transport) {
        if (sid) {
          res.writeHead(404).end();
          return;
        }
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => void transports.set(id, created),
        });
        transport = created;
        await build().connect(transport);
      }
      await transport.handleRequest(req, res);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}/mcp`,
    async close() {
      for (const t of transports.values()) await t.close().catch(() => undefined);
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}

beforeAll(async () => {
  mesh = await startTestMesh();
  worker = await mesh.startWorker('caps', ['caps'], conformanceHandler as WorkerHandler);
  thirdParty = await startAskingServer();
  thirdPartyAgent = new MeshWorker(await mesh.connect('specialist', 'asking'), {
    name: 'asking',
    tags: ['asking'],
    trustDomain: mesh.config.identity.trustDomain,
    endpoint: new URL(thirdParty.url).origin,
    handler: { name: 'asking', description: 'a third-party MCP server', handle: () => Promise.resolve('') },
    heartbeatSeconds: 1,
    concurrency: 4,
    protocols: [MCP_PROTOCOL],
    mcpEndpoint: thirdParty.url,
  });
  await thirdPartyAgent.start();
  await mesh.waitFor(
    () =>
      mesh.http.mcp.listTools().some((t) => t.name === 'caps__test_sampling') &&
      mesh.http.mcp.listTools().some((t) => t.name.endsWith('__ask_model')),
    10_000,
    'the conformance worker and the asking server federated',
  );
}, 30_000);
afterAll(async () => {
  await thirdPartyAgent?.drain(1000).catch(() => undefined);
  await mesh?.close();
  await thirdParty?.close();
});

/** An SDK client that declares `capabilities` and answers what it declared. */
async function connect(url: string, capabilities: ClientCapabilities): Promise<Client> {
  const client = new Client({ name: 'capabilities-test', version: '1' }, { capabilities });
  if (capabilities.sampling)
    client.setRequestHandler(CreateMessageRequestSchema, () => ({
      role: 'assistant' as const,
      content: { type: 'text' as const, text: 'sampled' },
      model: 'test-model',
    }));
  if (capabilities.elicitation)
    client.setRequestHandler(ElicitRequestSchema, () => ({
      action: 'accept' as const,
      content: { username: 'ada', email: 'ada@example.org' },
    }));
  if (capabilities.roots)
    client.setRequestHandler(ListRootsRequestSchema, () => ({
      roots: [{ uri: 'file:///work', name: 'work' }],
    }));
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** The call's outcome as text: the result's text, or the JSON-RPC error's message. */
async function outcome(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  try {
    const result = (await client.callTool({ name, arguments: args }, undefined, {
      timeout: 10_000,
    })) as CallToolResult;
    return result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  } catch (err) {
    return err instanceof McpError ? `error ${err.code}: ${err.message}` : String(err);
  }
}

const samplingArgs = { prompt: 'What is 2+2?' };

describe('a tool that needs a capability the caller did not declare', () => {
  for (const target of ['worker', 'coordinator'] as const) {
    it(`fails at once on the ${target}, naming the capability`, async () => {
      const url = target === 'worker' ? `${worker.url}/mcp` : `${mesh.url}/mcp`;
      const prefix = target === 'worker' ? '' : 'caps__';
      const client = await connect(url, {});
      try {
        const started = Date.now();
        expect(await outcome(client, `${prefix}test_sampling`, samplingArgs)).toMatch(
          /^error -32601: .*sampling capability \(sampling\/createMessage\), which the client did not declare/,
        );
        expect(await outcome(client, `${prefix}test_elicitation`, { message: 'who?' })).toMatch(
          /^error -32601: .*elicitation capability/,
        );
        expect(Date.now() - started).toBeLessThan(5000);
      } finally {
        await client.close();
      }
    });
  }

  it('fails at once through the coordinator for a third-party server that asks anyway', async () => {
    const name = mesh.http.mcp.listTools().find((t) => t.name.endsWith('__ask_model'))!.name;
    const client = await connect(`${mesh.url}/mcp`, {});
    try {
      const started = Date.now();
      expect(await outcome(client, name, {})).toMatch(/Method not found/);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await client.close();
    }
  });
});

describe('a caller that declared some capabilities', () => {
  it('gets its sampling tool answered with sampling alone, not its elicitation tool', async () => {
    const client = await connect(`${mesh.url}/mcp`, { sampling: {} });
    try {
      expect(await outcome(client, 'caps__test_sampling', samplingArgs)).toBe('LLM response: sampled');
      expect(await outcome(client, 'caps__test_elicitation', { message: 'who?' })).toMatch(
        /^error -32601: .*elicitation capability/,
      );
      const asking = mesh.http.mcp.listTools().find((t) => t.name.endsWith('__ask_model'))!.name;
      expect(await outcome(client, asking, {})).toBe('model said {"type":"text","text":"sampled"}');
    } finally {
      await client.close();
    }
  });

  it('gets its elicitation tool answered with elicitation alone', async () => {
    const client = await connect(`${mesh.url}/mcp`, { elicitation: {} });
    try {
      expect(await outcome(client, 'caps__test_elicitation', { message: 'who?' })).toBe(
        'User response: action=accept, content={"username":"ada","email":"ada@example.org"}',
      );
      expect(await outcome(client, 'caps__test_sampling', samplingArgs)).toMatch(/sampling capability/);
    } finally {
      await client.close();
    }
  });

  it('is asked for its roots by an agent, through the coordinator', async () => {
    const name = mesh.http.mcp.listTools().find((t) => t.name.endsWith('__ask_roots'))!.name;
    const client = await connect(`${mesh.url}/mcp`, { roots: {} });
    try {
      expect(await outcome(client, name, {})).toBe('file:///work');
    } finally {
      await client.close();
    }
  });
});
