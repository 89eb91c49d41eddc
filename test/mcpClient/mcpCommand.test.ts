// `amf mcp` as an IDE runs it: the built CLI (bin/amf.js -> dist/) spawned by the official SDK's
// StdioClientTransport, proxying a Streamable HTTP MCP server built with the same SDK (what it
// proxies of a real coordinator: mcpCommandMesh.test.ts).
// dist/ must be current: scripts/test.sh builds first; by hand, run `npx tsc -p tsconfig.json`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { mcpEndpointUrl } from '../../src/cli/mcpCommand.js';
// @ts-expect-error plain JS fixture without types
import { startMcpHttpFixture } from '../fixtures/mcpHttpServer.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const AMF_BIN = join(ROOT, 'bin/amf.js');

type Fixture = {
  url: string;
  close(): Promise<void>;
  addTool(name: string): void;
  forgetSessions(): void;
  streamsOpened: number;
  waitForStreams(n: number): Promise<void>;
  lastAuthorization: string | undefined;
};

async function ide(
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [AMF_BIN, 'mcp', ...args],
    stderr: 'pipe',
    // A data dir of its own so no user amf.yaml is read.
    env: { AMF_DATA_DIR: join(tmpdir(), 'amf-mcp-proxy-test'), PATH: process.env.PATH ?? '', ...extraEnv },
  });
  let stderr = '';
  transport.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const client = new Client({ name: 'ide-under-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

describe('amf mcp (stdio proxy of a Streamable HTTP MCP endpoint)', () => {
  let fixture: Fixture;
  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js')))
      throw new Error('dist/ is missing: run `npx tsc -p tsconfig.json` (scripts/test.sh builds first)');
    fixture = (await startMcpHttpFixture({ requireKey: 'k3y' })) as Fixture;
  });
  afterAll(() => fixture.close());

  it('forwards tools/list and tools/call, with the API key, and relays tools/list_changed', async () => {
    const base = fixture.url.replace(/\/mcp$/, '');
    const streams = fixture.streamsOpened;
    const { client } = await ide(['--coordinator', base], { AMF_API_KEY: 'k3y' });
    try {
      expect(client.getServerVersion()?.name).toBe('amf');
      expect(client.getServerCapabilities()?.tools?.listChanged).toBe(true);
      const tools = await client.listTools();
      expect(tools.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['add', 'echo']));
      expect(tools.tools.find((t) => t.name === 'add')?.inputSchema.properties).toHaveProperty('a');
      const res = await client.callTool({ name: 'add', arguments: { a: 20, b: 22 } });
      expect(res.content).toEqual([{ type: 'text', text: '42' }]);
      expect(fixture.lastAuthorization).toBe('Bearer k3y');

      // Unknown tools come back as the upstream's error, not as a crash of the proxy.
      const bad = await client.callTool({ name: 'nope', arguments: {} }).catch((e: Error) => e);
      expect(bad instanceof Error ? bad.message : JSON.stringify(bad)).toMatch(/nope/);

      let relayed!: () => void;
      const seen = new Promise<void>((resolve) => (relayed = resolve));
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => relayed());
      await fixture.waitForStreams(streams + 1);
      fixture.addTool('late');
      await seen;
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('late');
    } finally {
      await client.close();
    }
  });

  it('opens its upstream session again when the endpoint forgot it (a restart), and carries on', async () => {
    const base = fixture.url.replace(/\/mcp$/, '');
    const { client } = await ide(['--coordinator', base], { AMF_API_KEY: 'k3y' });
    try {
      expect((await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).content).toEqual([
        { type: 'text', text: '3' },
      ]);
      fixture.forgetSessions();
      expect((await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })).content).toEqual([
        { type: 'text', text: '5' },
      ]);
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('add');
    } finally {
      await client.close();
    }
  });

  it('fails fast with a message on stderr when the key is wrong (stdout stays protocol-only)', async () => {
    const base = fixture.url.replace(/\/mcp$/, '');
    const child = spawn(process.execPath, [AMF_BIN, 'mcp', '--coordinator', base], {
      env: {
        AMF_DATA_DIR: join(tmpdir(), 'amf-mcp-proxy-test'),
        AMF_API_KEY: 'wrong',
        PATH: process.env.PATH ?? '',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const [code] = (await once(child, 'close')) as [number];
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toMatch(
      /^amf mcp: the coordinator's MCP endpoint http:\/\/127\.0\.0\.1:\d+\/mcp refused the request \(HTTP 401\): the operator key is missing or wrong: set AMF_API_KEY, or give the coordinator's --data-dir \(its operator\.key is read\)\n$/,
    );
  });

  it('derives the endpoint from a coordinator URL', () => {
    expect(mcpEndpointUrl('http://127.0.0.1:8765').href).toBe('http://127.0.0.1:8765/mcp');
    expect(mcpEndpointUrl('http://127.0.0.1:8765/').href).toBe('http://127.0.0.1:8765/mcp');
    expect(mcpEndpointUrl('http://127.0.0.1:8765/mcp').href).toBe('http://127.0.0.1:8765/mcp');
    expect(() => mcpEndpointUrl('http://169.254.169.254')).toThrow(/metadata/);
  });
});
