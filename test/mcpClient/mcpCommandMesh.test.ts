// `amf mcp` against a real coordinator, as an IDE runs it: the built CLI spawned by the official
// SDK's StdioClientTransport (`node bin/amf.js mcp --coordinator URL`), proxying the coordinator's
// federated `/mcp` with everything it offers: tools (list_changed relayed when a worker joins),
// resources, templates, subscriptions, prompts, completions, logging, progress, and the agents'
// sampling and elicitation requests back to the IDE. A client that declares neither is never asked:
// the tool that needs them fails at once. The IDE started before any agent offered resources still
// gets them (the coordinator announces them from the start).
// dist/ must be current: scripts/test.sh builds first; by hand, run `npm run build`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type ClientCapabilities,
  type LoggingMessageNotification,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
// @ts-expect-error: an example handler module without types
import conformanceHandler from '../fixtures/mcpConformanceBase.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const AMF_BIN = join(ROOT, 'bin/amf.js');

let mesh: TestMesh;
beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist/cli/main.js')))
    throw new Error('dist/ is missing: run `npm run build` (scripts/test.sh builds first)');
  mesh = await startTestMesh();
}, 30_000);
afterAll(async () => {
  await mesh?.close();
});

/** An IDE: the SDK client over stdio to `amf mcp`, declaring `capabilities` and answering them. */
async function ide(capabilities: ClientCapabilities = {}): Promise<Client> {
  const client = new Client({ name: 'ide-under-test', version: '1.0.0' }, { capabilities });
  if (capabilities.sampling)
    client.setRequestHandler(CreateMessageRequestSchema, (request) => ({
      role: 'assistant' as const,
      content: {
        type: 'text' as const,
        text: `the IDE's model read ${request.params.messages.length} message`,
      },
      model: 'ide-model',
    }));
  if (capabilities.elicitation)
    client.setRequestHandler(ElicitRequestSchema, () => ({
      action: 'accept' as const,
      content: { username: 'ada', email: 'ada@example.org' },
    }));
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [AMF_BIN, 'mcp', '--coordinator', mesh.url],
      env: { AMF_DATA_DIR: join(tmpdir(), 'amf-mcp-proxy-test'), PATH: process.env.PATH ?? '' },
      stderr: 'pipe',
    }),
  );
  return client;
}

const text = (result: unknown) =>
  (result as CallToolResult).content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('amf mcp against a real coordinator', () => {
  let client: Client;
  afterAll(async () => {
    await client?.close();
  });

  it('lists, relays list_changed for, and calls a worker tool of the federated /mcp', async () => {
    // Started before any agent: the IDE's session must still see what joins later.
    client = await ide({ sampling: {}, elicitation: {} });
    let relayed!: () => void;
    const changed = new Promise<void>((resolve) => (relayed = resolve));
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => relayed());
    const before = (await client.listTools()).tools.map((t) => t.name);
    expect(before).not.toContain('mcp-proxy-1__echo');

    await mesh.startWorker('mcp-proxy-1', ['echo'], echoHandler);
    await changed;
    const tool = await mesh.waitFor(
      async () => (await client.listTools()).tools.find((t) => t.name === 'mcp-proxy-1__echo'),
      10_000,
      'mcp-proxy-1__echo listed through amf mcp',
    );
    expect(tool.inputSchema.properties).toHaveProperty('text');
    const result = (await client.callTool({
      name: 'mcp-proxy-1__echo',
      arguments: { text: 'through the proxy' },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(text(result)).toContain('through the proxy');
  });

  it('announces what the coordinator offers', async () => {
    const caps = client.getServerCapabilities()!;
    expect(caps.tools).toEqual({ listChanged: true });
    expect(caps.resources).toEqual({ listChanged: true, subscribe: true });
    expect(caps.prompts).toEqual({ listChanged: true });
    expect(caps.completions).toEqual({});
    expect(caps.logging).toEqual({});
  });

  it('proxies resources, templates, prompts and completions of an agent that joined later', async () => {
    await mesh.startWorker('fx', ['fx'], conformanceHandler as WorkerHandler);
    const uri = 'amf://fx/test://static-text';
    await mesh.waitFor(
      async () => (await client.listResources()).resources.some((r) => r.uri === uri),
      10_000,
      'the fixtures listed through amf mcp',
    );
    expect((await client.readResource({ uri })).contents).toEqual([
      { uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
    ]);
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toContain('amf://fx/test://template/{id}/data');
    const item = await client.readResource({ uri: 'amf://fx/test://template/7/data' });
    expect(JSON.parse((item.contents[0] as { text: string }).text)).toMatchObject({ id: '7' });

    expect((await client.listPrompts()).prompts.map((p) => p.name)).toContain(
      'fx__test_prompt_with_arguments',
    );
    const prompt = await client.getPrompt({
      name: 'fx__test_prompt_with_arguments',
      arguments: { arg1: 'a', arg2: 'b' },
    });
    expect(prompt.messages[0]!.content).toEqual({
      type: 'text',
      text: "Prompt with arguments: arg1='a', arg2='b'",
    });
    const completion = await client.complete({
      ref: { type: 'ref/prompt', name: 'fx__test_prompt_with_arguments' },
      argument: { name: 'arg1', value: 'par' },
    });
    expect(completion.completion.values).toEqual(['paris', 'park', 'party']);
  });

  it('relays a subscribed resource update, log messages at the level set, and progress', async () => {
    const updated = new Promise<string>((resolve) =>
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri)),
    );
    await client.subscribeResource({ uri: 'amf://fx/test://watched-resource' });
    await client.callTool({ name: 'fx__touch_watched_resource', arguments: {} });
    expect(await updated).toBe('amf://fx/test://watched-resource');

    const logs: LoggingMessageNotification['params'][] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
    await client.setLoggingLevel('info');
    expect(text(await client.callTool({ name: 'fx__test_tool_with_logging', arguments: {} }))).toBe(
      'Tool with logging executed successfully',
    );
    await mesh.waitFor(() => logs.length >= 3, 5000, 'three log messages relayed');
    expect(logs.map((l) => l.data)).toEqual([
      'Tool execution started',
      'Tool processing data',
      'Tool execution completed',
    ]);

    const progress: Progress[] = [];
    const done = await client.callTool({ name: 'fx__test_tool_with_progress', arguments: {} }, undefined, {
      onprogress: (p) => progress.push(p),
    });
    expect(text(done)).toBe('Progress test completed');
    expect(progress.map((p) => p.progress)).toEqual([0, 50, 100]);
  });

  it("asks the IDE's model and user for an agent's sampling and elicitation", async () => {
    expect(text(await client.callTool({ name: 'fx__test_sampling', arguments: { prompt: '2+2?' } }))).toBe(
      "LLM response: the IDE's model read 1 message",
    );
    expect(
      text(await client.callTool({ name: 'fx__test_elicitation', arguments: { message: 'who?' } })),
    ).toBe('User response: action=accept, content={"username":"ada","email":"ada@example.org"}');
  });

  it('fails at once a sampling tool for an IDE that declared no sampling', async () => {
    const plain = await ide();
    try {
      const started = Date.now();
      const err = await plain
        .callTool({ name: 'fx__test_sampling', arguments: { prompt: '2+2?' } })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-32601);
      expect((err as McpError).message).toMatch(/sampling capability/);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await plain.close();
    }
  });
});
