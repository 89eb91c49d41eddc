// The MCP client hub against real servers: a stdio fixture process and a Streamable HTTP fixture,
// both built with the official SDK.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import type { McpServerConfig } from '../../src/config/config.js';
import { McpClientHub } from '../../src/mcpClient/mcpClientHub.js';
import { checkStdioCommand, truncateContent } from '../../src/mcpClient/limits.js';
import { isNeverFetchedHost as isMetadataHost } from '../../src/net/hostRules.js';
// @ts-expect-error plain JS fixture without types
import { startMcpHttpFixture } from '../fixtures/mcpHttpServer.mjs';

const STDIO_FIXTURE = fileURLToPath(new URL('../fixtures/mcpStdioServer.mjs', import.meta.url));
const noFilter = { allow: null, deny: [] };

function stdio(name: string, extra: Partial<McpServerConfig> = {}): McpServerConfig {
  return {
    name,
    transport: 'stdio',
    command: process.execPath,
    args: [STDIO_FIXTURE],
    env: [],
    timeoutSeconds: 30,
    tools: noFilter,
    ...extra,
  } as McpServerConfig;
}

type Fixture = {
  url: string;
  close(): Promise<void>;
  addTool(name: string): void;
  streamsOpened: number;
  waitForStreams(n: number): Promise<void>;
};

describe('McpClientHub over stdio', () => {
  let hub: McpClientHub;
  const parentEnv = { ...process.env, AMF_TEST_PASSED: 'yes-passed', AMF_TEST_SECRET: 'must-not-leak' };

  beforeAll(async () => {
    hub = await McpClientHub.connect(
      [
        stdio('local', { env: ['AMF_TEST_PASSED'] } as Partial<McpServerConfig>),
        stdio('quick', { timeoutSeconds: 0.3 } as Partial<McpServerConfig>),
      ],
      { env: parentEnv },
    );
  });
  afterAll(() => hub.close());

  it('lists tools namespaced <server>__<tool>', () => {
    const names = hub.listTools().map((t) => t.name);
    expect(names).toContain('local__echo');
    expect(names).toContain('quick__slow');
    const echo = hub.listTools().find((t) => t.name === 'local__echo')!;
    expect(echo).toMatchObject({ server: 'local', tool: 'echo', description: 'returns its text' });
    expect(hub.failures).toEqual([]);
  });

  it('calls a tool on the right server', async () => {
    const res = await hub.callTool('local__echo', { text: 'hello' });
    expect(res).toMatchObject({ text: 'hello', isError: false, truncated: false });
  });

  it('starts the server with only the listed environment variables (not even PATH)', async () => {
    const res = await hub.callTool('local__env', {
      names: ['AMF_TEST_PASSED', 'AMF_TEST_SECRET', 'PATH', 'HOME'],
    });
    const seen = JSON.parse(res.text) as { values: Record<string, string | null>; visible: string[] };
    expect(seen.values).toEqual({
      AMF_TEST_PASSED: 'yes-passed',
      AMF_TEST_SECRET: null,
      PATH: null,
      HOME: null,
    });
    expect(seen.visible).toEqual(['AMF_TEST_PASSED']);
  });

  it('cuts results at 50,000 characters and says so', async () => {
    const res = await hub.callTool('local__big', {});
    expect(res.truncated).toBe(true);
    expect(res.content[0]!.text).toHaveLength(50_000);
    expect(res.content.at(-1)!.text).toMatch(/truncated: the tool returned 60000 characters/);
  });

  it('reports tool-level errors as isError', async () => {
    const res = await hub.callTool('local__fail', {});
    expect(res).toMatchObject({ isError: true, text: 'it broke' });
  });

  it('times out a slow call after the server timeout, and the server keeps working', async () => {
    await expect(hub.callTool('quick__slow', { ms: 20_000 })).rejects.toMatchObject({ code: 'TIMEOUT' });
    expect((await hub.callTool('quick__echo', { text: 'still here' })).text).toBe('still here');
  });

  it('aborts a call through its signal', async () => {
    const ac = new AbortController();
    const p = hub.callTool('local__slow', { ms: 20_000 }, { signal: ac.signal });
    ac.abort();
    await expect(p).rejects.toThrow();
  });

  it('refuses an unknown tool with NOT_FOUND', async () => {
    await expect(hub.callTool('local__nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('McpClientHub limits and refusals', () => {
  it('applies allow then deny filters by bare tool name', async () => {
    const hub = await McpClientHub.connect([
      stdio('allowed', {
        tools: { allow: ['echo', 'env', 'big'], deny: ['big'] },
      } as Partial<McpServerConfig>),
      stdio('denied', { tools: { allow: null, deny: ['echo'] } } as Partial<McpServerConfig>),
    ]);
    try {
      const names = hub.listTools().map((t) => t.name);
      expect(names.filter((n) => n.startsWith('allowed__')).sort()).toEqual([
        'allowed__echo',
        'allowed__env',
      ]);
      expect(names).not.toContain('denied__echo');
      expect(names).toContain('denied__slow');
      await expect(hub.callTool('allowed__big')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    } finally {
      await hub.close();
    }
  });

  it('refuses ".." in stdio command paths with a clear error, without failing the other servers', async () => {
    expect(() => checkStdioCommand('x', '../bin/server')).toThrow(/contains a "\.\." path segment/);
    expect(() => checkStdioCommand('x', '/opt/tools/../../bin/sh')).toThrow(/\.\./);
    expect(() => checkStdioCommand('x', 'C:\\tools\\..\\evil.exe')).toThrow(/\.\./);
    expect(() => checkStdioCommand('x', '/usr/bin/node')).not.toThrow();
    const hub = await McpClientHub.connect([
      stdio('bad', { command: '../node' } as Partial<McpServerConfig>),
      stdio('good'),
    ]);
    try {
      expect(hub.servers).toEqual(['good']);
      expect(hub.failures).toEqual([
        {
          server: 'bad',
          error: expect.stringMatching(
            /MCP server "bad": command "\.\.\/node" contains a "\.\." path segment/,
          ),
        },
      ]);
    } finally {
      await hub.close();
    }
  });

  it('logs a server that cannot start and keeps the others', async () => {
    const hub = await McpClientHub.connect([
      stdio('missing', { command: '/nonexistent/mcp-server' } as Partial<McpServerConfig>),
      stdio('good'),
    ]);
    try {
      expect(hub.servers).toEqual(['good']);
      expect(hub.failures[0]).toMatchObject({
        server: 'missing',
        error: expect.stringMatching(/cannot start/),
      });
    } finally {
      await hub.close();
    }
  });

  it('refuses a stdio server line over the message cap and closes that server', async () => {
    const hub = await McpClientHub.connect([
      stdio('flood', { timeoutSeconds: 10 } as Partial<McpServerConfig>),
    ]);
    try {
      await expect(hub.callTool('flood__flood')).rejects.toMatchObject({
        code: 'PAYLOAD_TOO_LARGE',
        message: expect.stringMatching(/larger than 10485760 bytes.*server disconnected/),
      });
      expect(hub.listTools()).toEqual([]);
      expect(hub.failures.map((f) => f.server)).toEqual(['flood']);
    } finally {
      await hub.close();
    }
  });

  it('refuses cloud metadata addresses for HTTP servers', async () => {
    for (const host of [
      '169.254.169.254',
      '[fd00:ec2::254]',
      'metadata.google.internal',
      '100.100.100.200',
      '[::ffff:169.254.169.254]',
      'METADATA.GOOGLE.INTERNAL.',
    ])
      expect(isMetadataHost(new URL(`http://${host}/mcp`).hostname), host).toBe(true);
    for (const host of ['127.0.0.1', 'localhost', '[::1]', 'example.com', '100.100.100.201'])
      expect(isMetadataHost(new URL(`http://${host}/mcp`).hostname), host).toBe(false);
    const hub = await McpClientHub.connect(
      [
        'http://169.254.169.254/mcp',
        'http://[fd00:ec2::254]/mcp',
        'http://metadata.google.internal/mcp',
        'http://100.100.100.200/mcp',
      ].map((url, i) => ({
        name: `meta${i}`,
        transport: 'http' as const,
        url,
        timeoutSeconds: 5,
        tools: noFilter,
      })),
    );
    expect(hub.servers).toEqual([]);
    expect(hub.failures).toHaveLength(4);
    for (const f of hub.failures) expect(f.error).toMatch(/cloud metadata or link-local address; refused/);
    await hub.close();
  });

  it('mcp.require_tls refuses plain http to a non-loopback host (loopback stays allowed)', async () => {
    const hub = await McpClientHub.connect(
      [
        {
          name: 'plain',
          transport: 'http',
          url: 'http://mcp.example.invalid/mcp',
          timeoutSeconds: 5,
          tools: noFilter,
        },
        {
          // A name that starts like a loopback address is still a name (it used to pass as local).
          name: 'lookalike',
          transport: 'http',
          url: 'http://127.evil.example/mcp',
          timeoutSeconds: 5,
          tools: noFilter,
        },
        stdio('local'),
      ],
      { requireTls: true },
    );
    try {
      expect(hub.servers).toEqual(['local']);
      expect(hub.failures.map((f) => f.error).join('\n')).toMatch(
        /plain http to mcp\.example\.invalid refused \(mcp\.require_tls\)/,
      );
      expect(hub.failures.map((f) => f.error).join('\n')).toMatch(
        /plain http to 127\.evil\.example refused \(mcp\.require_tls\)/,
      );
    } finally {
      await hub.close();
    }
  });

  it('truncateContent keeps short results and non-text blocks', () => {
    const short = [{ type: 'text', text: 'ok' }];
    expect(truncateContent(short)).toEqual({ content: short, truncated: false, totalChars: 2 });
    const mixed = truncateContent(
      [
        { type: 'text', text: 'a'.repeat(8) },
        { type: 'image', data: 'AA==', mimeType: 'image/png' },
        { type: 'text', text: 'b'.repeat(8) },
      ],
      10,
    );
    expect(mixed.content.map((c) => c.text ?? c.type)).toEqual([
      'a'.repeat(8),
      'image',
      'bb',
      expect.stringMatching(/truncated/),
    ]);
  });
});

describe('McpClientHub over Streamable HTTP', () => {
  let fixture: Fixture;
  beforeAll(async () => {
    fixture = (await startMcpHttpFixture()) as Fixture;
  });
  afterAll(() => fixture.close());

  const http = (name: string, extra: Partial<McpServerConfig> = {}): McpServerConfig =>
    ({
      name,
      transport: 'http',
      url: fixture.url,
      timeoutSeconds: 10,
      tools: noFilter,
      ...extra,
    }) as McpServerConfig;

  it('lists and calls tools, next to a stdio server', async () => {
    const hub = await McpClientHub.connect([http('remote'), stdio('local')]);
    try {
      expect(hub.listTools().map((t) => t.name)).toEqual(
        expect.arrayContaining(['remote__add', 'remote__echo', 'local__echo']),
      );
      expect((await hub.callTool('remote__add', { a: 2, b: 3 })).text).toBe('5');
      expect((await hub.callTool('local__echo', { text: 'x' })).text).toBe('x');
    } finally {
      await hub.close();
    }
  });

  it('refuses a response over the 10 MB message cap and disconnects that server only', async () => {
    const hub = await McpClientHub.connect([http('remote'), http('other')]);
    try {
      await expect(hub.callTool('remote__huge')).rejects.toMatchObject({
        code: 'PAYLOAD_TOO_LARGE',
        message: expect.stringMatching(/larger than 10485760 bytes refused; server disconnected/),
      });
      expect(hub.servers).toEqual(['other']);
      expect((await hub.callTool('other__echo', { text: 'after' })).text).toBe('after');
    } finally {
      await hub.close();
    }
  });

  it('re-reads the tool list when the server announces tools/list_changed', async () => {
    let changed!: () => void;
    const seen = new Promise<void>((resolve) => (changed = resolve));
    const streams = fixture.streamsOpened;
    const hub = await McpClientHub.connect([http('remote')], { onToolsChanged: () => changed() });
    try {
      // Notifications travel on the client's GET stream: add the tool once that stream is open.
      await fixture.waitForStreams(streams + 1);
      fixture.addTool('fresh');
      await seen;
      expect(hub.listTools().map((t) => t.name)).toContain('remote__fresh');
    } finally {
      await hub.close();
    }
  });

  it('a server that is down is a logged failure, not an exception', async () => {
    const hub = await McpClientHub.connect([
      http('down', { url: 'http://127.0.0.1:1/mcp' } as Partial<McpServerConfig>),
      stdio('local'),
    ]);
    try {
      expect(hub.servers).toEqual(['local']);
      expect(hub.failures[0]!.server).toBe('down');
    } finally {
      await hub.close();
    }
  });
});
