/**
 * A worker re-exports its configured MCP servers (`reexportMcpServers`): the coordinator federates
 * their tools, resources, templates and prompts with the worker's own. The configured server of
 * the first part is another worker's `/mcp` serving the conformance fixtures (a real SDK server over
 * HTTP). The second part re-exports a stateful stdio server of the official SDK
 * (test/fixtures/statefulStdioServer.mjs, standing in for @modelcontextprotocol/server-everything):
 * each caller gets a session of its own with it, through the coordinator as well as directly, and
 * keeps completions, subscriptions, logging, progress, sampling and elicitation.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type CallToolResult,
  type ClientCapabilities,
  type LoggingMessageNotification,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
// @ts-expect-error: an example handler module without types
import conformanceHandler from '../fixtures/mcpConformanceBase.mjs';

let mesh: TestMesh;
let fixtures: RunningWorker;
let reexporter: RunningWorker;

beforeAll(async () => {
  mesh = await startTestMesh();
  fixtures = await mesh.startWorker('fixtures', ['fixtures'], conformanceHandler as WorkerHandler);
  reexporter = await startWorker({
    name: 'reexporter',
    tags: ['reexporter'],
    handler: echoHandler,
    natsUrl: mesh.coordinator.natsUrl,
    credential: mesh.coordinator.credentials.specialist,
    port: 0,
    heartbeatSeconds: 1,
    mcpServers: [
      {
        name: 'fx',
        transport: 'http',
        url: `${fixtures.url}/mcp`,
        timeoutSeconds: 10,
        tools: { allow: ['test_image_content', 'test_simple_text'], deny: [] },
      },
    ],
    reexportMcpServers: true,
  });
  await mesh.waitFor(
    () =>
      mesh.http.mcp
        .extras()
        .prompts.list()
        .some((p) => p.name.startsWith('reexporter__')),
    10_000,
    'the re-exported prompts federated',
  );
}, 30_000);
afterAll(async () => {
  await reexporter?.close(1000);
  await mesh?.close();
});

describe('re-exported MCP servers', () => {
  it('federates the configured server tools (filtered), resources, templates and prompts', async () => {
    const client = new Client({ name: 'reexport-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`)));
    try {
      const tools = (await client.listTools()).tools
        .map((t) => t.name)
        .filter((n) => n.startsWith('reexporter__'));
      expect(tools.sort()).toEqual([
        'reexporter__echo',
        'reexporter__fx__test_image_content',
        'reexporter__fx__test_simple_text',
      ]);
      const image = await client.callTool({ name: 'reexporter__fx__test_image_content', arguments: {} });
      expect(image.content).toEqual([expect.objectContaining({ type: 'image', mimeType: 'image/png' })]);

      const uri = 'amf://reexporter/amf://fx/test://static-text';
      const resources = (await client.listResources()).resources.map((r) => r.uri);
      expect(resources).toContain(uri);
      const read = await client.readResource({ uri });
      expect(read.contents).toEqual([
        { uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
      ]);
      const templated = await client.readResource({
        uri: 'amf://reexporter/amf://fx/test://template/7/data',
      });
      expect(JSON.parse((templated.contents[0] as { text: string }).text)).toMatchObject({ id: '7' });

      const prompt = await client.getPrompt({
        name: 'reexporter__fx__test_prompt_with_arguments',
        arguments: { arg1: 'a', arg2: 'b' },
      });
      expect(prompt.messages[0]!.content).toEqual({
        type: 'text',
        text: "Prompt with arguments: arg1='a', arg2='b'",
      });
    } finally {
      await client.close();
    }
  });
});

const STATEFUL = fileURLToPath(new URL('../fixtures/statefulStdioServer.mjs', import.meta.url));

describe('a re-exported stateful server', () => {
  let host: RunningWorker;
  const clients: Client[] = [];
  const wire = (tool: string) => `stateful-host__st__${tool}`;

  beforeAll(async () => {
    host = await startWorker({
      name: 'stateful-host',
      tags: ['stateful-host'],
      handler: echoHandler,
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      port: 0,
      heartbeatSeconds: 1,
      mcpServers: [
        {
          name: 'st',
          transport: 'stdio',
          command: process.execPath,
          args: [STATEFUL],
          env: [],
          timeoutSeconds: 10,
          tools: { allow: null, deny: [] },
        },
      ],
      reexportMcpServers: true,
    });
    await mesh.waitFor(
      () => mesh.http.mcp.listTools().some((t) => t.name === wire('toggle')),
      10_000,
      'the stateful server federated',
    );
  }, 30_000);
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await host?.close(1000);
  });

  /** An SDK client of `url` that declares `capabilities` and answers what it declared. */
  async function client(url: string, capabilities: ClientCapabilities = {}): Promise<Client> {
    const c = new Client({ name: 'reexport-caller', version: '1' }, { capabilities });
    if (capabilities.sampling)
      c.setRequestHandler(CreateMessageRequestSchema, () => ({
        role: 'assistant' as const,
        content: { type: 'text' as const, text: 'hi from the caller' },
        model: 'caller-model',
      }));
    if (capabilities.elicitation)
      c.setRequestHandler(ElicitRequestSchema, () => ({
        action: 'accept' as const,
        content: { name: 'ada' },
      }));
    await c.connect(new StreamableHTTPClientTransport(new URL(url)));
    clients.push(c);
    return c;
  }
  const call = async (c: Client, name: string, options: Parameters<Client['callTool']>[2] = {}) =>
    ((await c.callTool({ name, arguments: {} }, undefined, options)) as CallToolResult).content
      .map((x) => (x.type === 'text' ? x.text : ''))
      .join('');

  it('lists every tool, those for sampling and elicitation too', () => {
    const names = mesh.http.mcp.listTools().map((t) => t.name);
    for (const tool of ['toggle', 'switch', 'chatty', 'slow', 'ask_model', 'ask_user'])
      expect(names).toContain(wire(tool));
  });

  it("gives each caller its own session: one caller's toggle is not another's, through the coordinator", async () => {
    const a = await client(`${mesh.url}/mcp`);
    const b = await client(`${mesh.url}/mcp`);
    expect(await call(a, wire('toggle'))).toBe('switch on');
    expect(await call(b, wire('switch'))).toBe('switch off');
    expect(await call(a, wire('switch'))).toBe('switch on');
    expect(await call(b, wire('toggle'))).toBe('switch on');
    expect(await call(a, wire('toggle'))).toBe('switch off');
  });

  it("gives each caller its own session on the worker's /mcp too", async () => {
    const a = await client(`${host.url}/mcp`);
    const b = await client(`${host.url}/mcp`);
    expect(await call(a, 'st__toggle')).toBe('switch on');
    expect(await call(b, 'st__switch')).toBe('switch off');
  });

  it('keeps progress, log levels and messages, subscriptions and completions', async () => {
    const a = await client(`${mesh.url}/mcp`);
    const progress: Progress[] = [];
    expect(await call(a, wire('slow'), { onprogress: (p) => progress.push(p) })).toBe('slow done');
    expect(progress.map((p) => p.progress)).toEqual([1, 2, 3]);

    const logs: LoggingMessageNotification['params'][] = [];
    a.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
    await a.setLoggingLevel('info');
    expect(await call(a, wire('chatty'))).toBe('logged');
    await mesh.waitFor(() => logs.length >= 2, 5000, 'the log messages relayed');
    expect(logs.map((l) => [l.level, l.data, l.logger])).toEqual([
      ['info', 'info message', 'stateful-host/st/chatty'],
      ['error', 'error message', 'stateful-host/st/chatty'],
    ]);

    const uri = 'amf://stateful-host/amf://st/state://switch';
    const updated = new Promise<string>((resolve) =>
      a.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri)),
    );
    await a.subscribeResource({ uri });
    await call(a, wire('toggle'));
    expect(await updated).toBe(uri);
    expect((await a.readResource({ uri })).contents[0]).toMatchObject({ uri, text: 'on' });

    const prompt = await a.complete({
      ref: { type: 'ref/prompt', name: 'stateful-host__st__greet' },
      argument: { name: 'name', value: 'a' },
    });
    expect(prompt.completion.values).toEqual(['ada', 'alan']);
    const template = await a.complete({
      ref: { type: 'ref/resource', uri: 'amf://stateful-host/amf://st/item://{id}' },
      argument: { name: 'id', value: 'ap' },
    });
    expect(template.completion.values).toEqual(['apple', 'apricot']);
  });

  it("asks the caller's model and user for the server's sampling and elicitation", async () => {
    const c = await client(`${mesh.url}/mcp`, { sampling: {}, elicitation: {} });
    expect(await call(c, wire('ask_model'))).toBe('model: hi from the caller');
    expect(await call(c, wire('ask_user'))).toBe('user: accept ada');
    // The coordinator's own connection for this caller ends after 2 s idle; the caller's session
    // with the server does not: its switch is where the caller left it.
    expect(await call(c, wire('toggle'))).toBe('switch on');
    await new Promise((r) => setTimeout(r, 2500));
    expect(await call(c, wire('switch'))).toBe('switch on');
    // A caller that declared neither has a session where the server offers neither tool.
    const plain = await client(`${mesh.url}/mcp`);
    const refused = (await plain.callTool({ name: wire('ask_model'), arguments: {} })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toMatch(/ask_model not found/);
  });
});
