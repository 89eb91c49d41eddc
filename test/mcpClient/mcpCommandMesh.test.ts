// `amf mcp` against a real coordinator: the built CLI spawned by the SDK's StdioClientTransport (as an
// IDE does) proxies the coordinator's federated `/mcp`; a worker joining shows up as a relayed
// tools/list_changed and its tool is callable through the proxy.
// dist/ must be current: scripts/test.sh builds first; by hand, run `npx tsc -p tsconfig.json`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const AMF_BIN = join(ROOT, 'bin/amf.js');

let mesh: TestMesh;
beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist/cli/main.js')))
    throw new Error('dist/ is missing: run `npx tsc -p tsconfig.json` (scripts/test.sh builds first)');
  mesh = await startTestMesh();
}, 30_000);
afterAll(async () => {
  await mesh?.close();
});

describe('amf mcp against a real coordinator', () => {
  it('lists, relays list_changed for, and calls a worker tool of the federated /mcp', async () => {
    const client = new Client({ name: 'ide-under-test', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [AMF_BIN, 'mcp', '--coordinator', mesh.url],
        env: { AMF_DATA_DIR: join(tmpdir(), 'amf-mcp-proxy-test'), PATH: process.env.PATH ?? '' },
        stderr: 'pipe',
      }),
    );
    try {
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
      expect(result.content.map((c) => (c.type === 'text' ? c.text : '')).join('')).toContain(
        'through the proxy',
      );
    } finally {
      await client.close();
    }
  });
});
