/**
 * A worker re-exports its configured MCP servers (`reexportMcpServers`): the coordinator federates
 * their tools, resources, templates and prompts with the worker's own. The configured server here
 * is another worker's `/mcp` serving the conformance fixtures (a real SDK server over HTTP).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
// @ts-expect-error: an example handler module without types
import conformanceHandler from '../../examples/handlers/mcp-conformance.mjs';

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
