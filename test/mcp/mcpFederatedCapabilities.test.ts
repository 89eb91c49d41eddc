/**
 * The coordinator's `/mcp` beyond tools, with the official SDK client against a real mesh: an
 * agent's resources (list, read, templates, subscribe with the update notification relayed),
 * prompts, completions and logging (level fanned out, log messages relayed) under namespaced names,
 * an OPA deny of a resource read (audited), and capabilities announced from the start, so that a
 * session opened before any agent offers resources or prompts (an IDE's) gets them when one does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  LoggingMessageNotificationSchema,
  McpError,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type LoggingMessageNotification,
} from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import type { HandlerMcpSurface, WorkerHandler } from '../../src/worker/handlerApi.js';
import type { McpAuditRecord } from '../../src/protocols/mcp/federation/audit.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';

const updates = new Set<(uri: string) => void>();
const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });

const surface: HandlerMcpSurface = {
  logging: true,
  tools: [
    {
      definition: {
        name: 'log_three',
        description: 'logs at debug, info and error',
        inputSchema: { type: 'object' },
      },
      async call(_args, ctx) {
        await ctx.log('debug', 'debug detail', 'steps');
        await ctx.log('info', 'step done', 'steps');
        await ctx.log('error', 'step failed', 'steps');
        return text('logged');
      },
    },
    {
      definition: {
        name: 'touch',
        description: 'marks doc://watched changed',
        inputSchema: { type: 'object' },
      },
      call: () => {
        for (const notify of updates) notify('doc://watched');
        return Promise.resolve(text('touched'));
      },
    },
  ],
  resources: [
    {
      resource: { uri: 'doc://readme', name: 'readme', mimeType: 'text/plain' },
      read: () =>
        Promise.resolve({ contents: [{ uri: 'doc://readme', mimeType: 'text/plain', text: 'hello' }] }),
    },
    {
      resource: { uri: 'doc://watched', name: 'watched' },
      read: () => Promise.resolve({ contents: [{ uri: 'doc://watched', text: 'v1' }] }),
    },
    {
      // Denied by policies/data.json (`denied_resources`).
      resource: { uri: 'test://amf-denied-resource', name: 'secret' },
      read: () =>
        Promise.resolve({ contents: [{ uri: 'test://amf-denied-resource', text: 'must not leak' }] }),
    },
  ],
  resourceTemplates: [
    {
      template: { uriTemplate: 'doc://items/{id}', name: 'item' },
      read: (uri, vars) => Promise.resolve({ contents: [{ uri, text: `item ${vars.id}` }] }),
    },
  ],
  prompts: [
    {
      prompt: { name: 'greet', description: 'greets', arguments: [{ name: 'who', required: true }] },
      get: (args) =>
        Promise.resolve({
          messages: [{ role: 'user', content: { type: 'text', text: `Hello ${args.who}` } }],
        }),
    },
  ],
  complete: (params) =>
    Promise.resolve(['alice', 'albert', 'bob'].filter((v) => v.startsWith(params.argument.value))),
  subscriptions: { onUpdate: (notify) => updates.add(notify) },
};

const docs: WorkerHandler = {
  name: 'docs_tool',
  description: 'a worker with resources and prompts',
  handle: () => Promise.resolve('ok'),
  mcp: surface,
};

let mesh: TestMesh;

beforeAll(async () => {
  mesh = await startTestMesh();
}, 30_000);
afterAll(async () => {
  await mesh?.close();
});

async function connect(): Promise<Client> {
  const client = new Client({ name: 'federated-capabilities-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`)));
  return client;
}

async function audit(limit = 20): Promise<McpAuditRecord[]> {
  const res = await mesh.fetch(`/audit?limit=${limit}`);
  return ((await res.json()) as { records: McpAuditRecord[] }).records;
}

describe('federated capabilities', () => {
  it('announces resources, prompts and completions before any agent offers them, then lists them', async () => {
    await mesh.startWorker('plain-echo', ['plain-echo'], echoHandler);
    await mesh.waitFor(() => mesh.http.mcp.listTools().length > 0, 10_000, 'echo federated');
    const client = await connect();
    try {
      const caps = client.getServerCapabilities()!;
      expect(caps.tools).toBeDefined();
      expect(caps.resources).toEqual({ listChanged: true, subscribe: true });
      expect(caps.prompts).toEqual({ listChanged: true });
      expect(caps.completions).toEqual({});
      expect((await client.listResources()).resources).toEqual([]);
      expect((await client.listPrompts()).prompts).toEqual([]);
      await expect(client.getPrompt({ name: 'docs__greet' })).rejects.toThrow(/not found/);

      // An agent with resources and prompts joins: this session hears of them and lists them.
      let resourcesChanged!: () => void;
      const changed = new Promise<void>((resolve) => (resourcesChanged = resolve));
      client.setNotificationHandler(ResourceListChangedNotificationSchema, () => resourcesChanged());
      await mesh.startWorker('docs', ['docs'], docs);
      await changed;
      expect((await client.listResources()).resources.map((r) => r.uri)).toContain('amf://docs/doc://readme');
      expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(['docs__greet']);
    } finally {
      await client.close();
    }
  });

  it('federates resources, templates, prompts and completions under namespaced names', async () => {
    await mesh.waitFor(() => mesh.http.mcp.extras().prompts.list().length > 0, 10_000, 'docs federated');
    const client = await connect();
    try {
      const caps = client.getServerCapabilities()!;
      expect(caps.resources).toEqual({ listChanged: true, subscribe: true });
      expect(caps.prompts).toEqual({ listChanged: true });
      expect(caps.completions).toEqual({});

      const { resources } = await client.listResources();
      expect(resources.map((r) => r.uri).sort()).toEqual([
        'amf://docs/doc://readme',
        'amf://docs/doc://watched',
        'amf://docs/test://amf-denied-resource',
      ]);
      expect(resources[0]!.description).toMatch(/^\[.*docs\]/);
      const read = await client.readResource({ uri: 'amf://docs/doc://readme' });
      expect(read.contents).toEqual([
        { uri: 'amf://docs/doc://readme', mimeType: 'text/plain', text: 'hello' },
      ]);

      const { resourceTemplates } = await client.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['amf://docs/doc://items/{id}']);
      const item = await client.readResource({ uri: 'amf://docs/doc://items/42' });
      expect(item.contents[0]).toMatchObject({ uri: 'amf://docs/doc://items/42', text: 'item 42' });
      await expect(client.readResource({ uri: 'amf://nobody/doc://readme' })).rejects.toThrow(/not found/);

      const { prompts } = await client.listPrompts();
      expect(prompts.map((p) => p.name)).toEqual(['docs__greet']);
      const prompt = await client.getPrompt({ name: 'docs__greet', arguments: { who: 'Ada' } });
      expect(prompt.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'Hello Ada' } }]);

      const completion = await client.complete({
        ref: { type: 'ref/prompt', name: 'docs__greet' },
        argument: { name: 'who', value: 'al' },
      });
      expect(completion.completion.values).toEqual(['alice', 'albert']);
    } finally {
      await client.close();
    }
  });

  it('relays the agent update of a subscribed resource, and none after unsubscribe', async () => {
    const client = await connect();
    try {
      const seen: string[] = [];
      let resolveFirst: () => void;
      const first = new Promise<void>((r) => (resolveFirst = r));
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
        seen.push(n.params.uri);
        resolveFirst();
      });
      await client.subscribeResource({ uri: 'amf://docs/doc://watched' });
      await client.callTool({ name: 'docs__touch', arguments: {} });
      await first;
      expect(seen).toEqual(['amf://docs/doc://watched']);
      await client.unsubscribeResource({ uri: 'amf://docs/doc://watched' });
      await client.callTool({ name: 'docs__touch', arguments: {} });
      // A round trip after the second touch: a relayed update would have arrived before its answer.
      await client.ping();
      expect(seen).toEqual(['amf://docs/doc://watched']);
    } finally {
      await client.close();
    }
  });

  it('fans the log level out to agents and relays their log messages at that level', async () => {
    const client = await connect();
    try {
      const logs: LoggingMessageNotification['params'][] = [];
      client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
        logs.push(n.params);
      });
      await client.setLoggingLevel('info');
      const result = await client.callTool({ name: 'docs__log_three', arguments: {} });
      expect(result.content).toEqual([{ type: 'text', text: 'logged' }]);
      await mesh.waitFor(() => logs.length >= 2, 5000, 'log messages relayed');
      expect(logs.map((l) => [l.level, l.data, l.logger])).toEqual([
        ['info', 'step done', 'docs/steps'],
        ['error', 'step failed', 'docs/steps'],
      ]);
    } finally {
      await client.close();
    }
  });

  it('refuses a resource read the policy denies and audits it', async () => {
    const client = await connect();
    try {
      const err = await client
        .readResource({ uri: 'amf://docs/test://amf-denied-resource' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-32003);
      expect((err as McpError).message).toMatch(/resource_denied/);
      const records = await audit();
      const record = records.find((r) => r.wire_name === 'amf://docs/test://amf-denied-resource');
      expect(record).toMatchObject({
        capability: 'resource',
        decision: 'deny',
        reasons: ['resource_denied'],
        outcome: 'denied',
      });
      expect(record!.tool).toMatch(/\/test:\/\/amf-denied-resource$/);
      // An allowed read is audited too.
      await client.readResource({ uri: 'amf://docs/doc://readme' });
      const after = await audit();
      expect(after.find((r) => r.wire_name === 'amf://docs/doc://readme')).toMatchObject({
        capability: 'resource',
        decision: 'allow',
        outcome: 'ok',
      });
    } finally {
      await client.close();
    }
  });
});
