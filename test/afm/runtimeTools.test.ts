// How an AFM file's `tools.mcp` becomes the agent's tools: a Streamable HTTP MCP server with bearer
// authentication and an allow filter, stdio servers with exactly their listed environment (plus
// PATH), a server that cannot be used listed as a failure, and tool names made safe for model APIs.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectAfmTools, type McpToolProvider } from '../../src/afm/runtime/index.js';
import { authHeaders, modelSafeNames, toHubServer } from '../../src/afm/runtime/toolProvider.js';
// @ts-expect-error plain JS fixture without types
import { startMcpHttpFixture } from '../fixtures/mcpHttpServer.mjs';

const STDIO_FIXTURE = fileURLToPath(new URL('../fixtures/mcpStdioServer.mjs', import.meta.url));

type HttpFixture = { url: string; close(): Promise<void>; lastAuthorization: string | undefined };

describe('connectAfmTools', () => {
  let http: HttpFixture;
  let tools: McpToolProvider;

  beforeAll(async () => {
    http = (await startMcpHttpFixture({ requireKey: 'mcp-token' })) as HttpFixture;
    tools = await connectAfmTools(
      [
        {
          name: 'calc',
          transport: { type: 'http', url: http.url, authentication: { type: 'bearer', token: 'mcp-token' } },
          tool_filter: { allow: ['add'] },
        },
        {
          name: 'local',
          transport: {
            type: 'stdio',
            command: process.execPath,
            args: [STDIO_FIXTURE],
            env: { AFM_GIVEN: 'from-the-file' },
          },
          tool_filter: { deny: ['flood', 'big'] },
        },
        {
          name: 'locked',
          transport: { type: 'http', url: http.url, authentication: { type: 'oauth2', client_id: 'x' } },
        },
      ],
      { env: { PATH: process.env.PATH, AMF_SECRET_OF_THE_AGENT: 'must-not-leak' } },
    );
  });
  afterAll(async () => {
    await tools.close();
    await http.close();
  });

  it('offers the allowed tools of every usable server, namespaced per server', () => {
    const names = tools
      .listTools()
      .map((t) => t.name)
      .sort();
    expect(names).toEqual(['calc__add', 'local__echo', 'local__env', 'local__fail', 'local__slow']);
  });

  it('calls an HTTP MCP server with the configured bearer token', async () => {
    const res = await tools.callTool('calc__add', { a: 2, b: 40 });
    expect(res).toEqual({ text: '42', isError: false });
    expect(http.lastAuthorization).toBe('Bearer mcp-token');
  });

  it("starts stdio servers with the entry's env and PATH, nothing else from the agent", async () => {
    const res = await tools.callTool('local__env', { names: ['AFM_GIVEN', 'AMF_SECRET_OF_THE_AGENT'] });
    const seen = JSON.parse(res.text) as { values: Record<string, string | null>; visible: string[] };
    expect(seen.values).toEqual({ AFM_GIVEN: 'from-the-file', AMF_SECRET_OF_THE_AGENT: null });
    expect(seen.visible).toEqual(['AFM_GIVEN', 'PATH']);
  });

  it('reports a tool failure as an error result, and a server it cannot use as a failure', async () => {
    expect(await tools.callTool('local__fail', {})).toEqual({ text: 'it broke', isError: true });
    expect(tools.failures).toEqual([
      { server: 'locked', error: expect.stringContaining('authentication type "oauth2" is not supported') },
    ]);
    await expect(tools.callTool('locked__add', {})).rejects.toThrow(/no tool "locked__add"/);
  });
});

describe('tool provider helpers', () => {
  it('makes MCP names safe for model APIs without clashes', () => {
    const safe = modelSafeNames([
      'github__issues.create',
      'github__issues_create',
      'a'.repeat(70),
      'ok_name',
    ]);
    expect(safe.get('github__issues.create')).toBe('github__issues_create');
    expect(safe.get('github__issues_create')).toBe('github__issues_create_2');
    expect(safe.get('a'.repeat(70))).toHaveLength(64);
    expect(safe.get('ok_name')).toBe('ok_name');
  });

  it('builds authentication headers for bearer, api-key (with a custom header) and basic', () => {
    expect(authHeaders('s', { type: 'bearer', token: 't' })).toEqual({ Authorization: 'Bearer t' });
    expect(authHeaders('s', { type: 'api-key', api_key: 'k' })).toEqual({ Authorization: 'k' });
    expect(authHeaders('s', { type: 'api-key', api_key: 'k', header: 'X-Api-Key' })).toEqual({
      'X-Api-Key': 'k',
    });
    expect(authHeaders('s', { type: 'basic', username: 'u', password: 'p' })).toEqual({
      Authorization: `Basic ${Buffer.from('u:p').toString('base64')}`,
    });
  });

  it('maps an AFM filter onto the hub filter (allow absent = all)', () => {
    const entry = { name: 'x', transport: { type: 'http' as const, url: 'http://127.0.0.1:1/mcp' } };
    expect(toHubServer(entry, {}).config.tools).toEqual({ allow: null, deny: [] });
    expect(toHubServer({ ...entry, tool_filter: { allow: ['a'], deny: ['b'] } }, {}).config.tools).toEqual({
      allow: ['a'],
      deny: ['b'],
    });
  });
});
