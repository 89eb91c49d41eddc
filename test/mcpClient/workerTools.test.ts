/**
 * Handlers use MCP tools: a worker configured with MCP servers (`mcp.servers`, like OpenFang's
 * `[[mcp_servers]]`) connects them through the McpClientHub and hands them to its handler as
 * `ctx.tools`, namespaced per server, filtered, with the environment pass-through and timeouts of
 * the configuration. Shown in process and through `amf worker --config amf.yaml` with a real stdio
 * MCP server process.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { McpServerConfig } from '../../src/config/config.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { startWorker } from '../../src/apps/workerApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
// @ts-expect-error plain JS fixture without types
import toolUser from '../fixtures/mcpToolUserHandler.mjs';

const STDIO_FIXTURE = fileURLToPath(new URL('../fixtures/mcpStdioServer.mjs', import.meta.url));
const HANDLER = fileURLToPath(new URL('../fixtures/mcpToolUserHandler.mjs', import.meta.url));
const AMF = fileURLToPath(new URL('../../bin/amf.js', import.meta.url));

let mesh: TestMesh;
let dir: string;

beforeAll(async () => {
  mesh = await startTestMesh();
  dir = await mkdtemp(join(tmpdir(), 'amf-worker-tools-'));
}, 30_000);
afterAll(async () => {
  await mesh?.close();
  await rm(dir, { recursive: true, force: true });
});

async function ask(tag: string, request: unknown): Promise<unknown> {
  const answer = await mesh.coordinator.dispatcher.submit({
    tag,
    task: JSON.stringify(request),
    timeoutMs: 20_000,
  });
  return JSON.parse(answer.text);
}

function stdio(name: string, extra: Record<string, unknown> = {}): McpServerConfig {
  return {
    name,
    transport: 'stdio',
    command: process.execPath,
    args: [STDIO_FIXTURE],
    env: [],
    timeoutSeconds: 30,
    tools: { allow: null, deny: [] },
    ...extra,
  } as McpServerConfig;
}

describe('ctx.tools in process', () => {
  it('lists namespaced, filtered tools and calls them with the configured env and timeout', async () => {
    const w = await startWorker({
      name: 'tools-inproc',
      tags: ['tools-a'],
      handler: toolUser as WorkerHandler,
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      port: 0,
      heartbeatSeconds: 1,
      mcpServers: [
        stdio('fx', { env: ['AMF_TOOL_PASSED'], tools: { allow: null, deny: ['flood', 'big'] } }),
        stdio('quick', { timeoutSeconds: 0.3, tools: { allow: ['slow', 'echo'], deny: [] } }),
      ],
      mcpClient: { env: { ...process.env, AMF_TOOL_PASSED: 'passed', AMF_TOOL_SECRET: 'kept-out' } },
    });
    try {
      await mesh.waitFor(() => mesh.coordinator.registry.isLive(w.worker.agentId), 10_000, 'admitted');
      expect(w.mcpClients?.failures).toEqual([]);
      expect(await ask('tools-a', { list: true })).toEqual([
        'fx__echo',
        'fx__env',
        'fx__fail',
        'fx__slow',
        'quick__echo',
        'quick__slow',
      ]);
      expect(await ask('tools-a', { tool: 'fx__echo', args: { text: 'through ctx.tools' } })).toEqual({
        text: 'through ctx.tools',
        isError: false,
      });
      const env = (await ask('tools-a', {
        tool: 'fx__env',
        args: { names: ['AMF_TOOL_PASSED', 'AMF_TOOL_SECRET'] },
      })) as { text: string };
      expect(JSON.parse(env.text).values).toEqual({ AMF_TOOL_PASSED: 'passed', AMF_TOOL_SECRET: null });
      expect(await ask('tools-a', { tool: 'fx__fail' })).toEqual({ text: 'it broke', isError: true });
      expect(await ask('tools-a', { tool: 'quick__slow', args: { ms: 5000 } })).toMatchObject({
        error: 'TIMEOUT',
      });
      expect(await ask('tools-a', { tool: 'fx__flood' })).toMatchObject({ error: 'NOT_FOUND' });
    } finally {
      await w.close(1000);
    }
  }, 60_000);

  it('a handler of a worker without MCP servers has no ctx.tools', async () => {
    const w = await mesh.startWorker('tools-none', ['tools-none'], toolUser as WorkerHandler);
    try {
      expect(await ask('tools-none', { list: true })).toEqual({ error: 'NO_TOOLS' });
    } finally {
      await w.close(1000);
    }
  });
});

describe('amf worker with mcp.servers in amf.yaml', () => {
  it('connects the stdio server of the config file and its handler calls a tool', async () => {
    const config = join(dir, 'worker.yaml');
    await writeFile(
      config,
      [
        'mcp:',
        '  servers:',
        '    - name: files',
        '      transport: stdio',
        `      command: ${JSON.stringify(process.execPath)}`,
        `      args: [${JSON.stringify(STDIO_FIXTURE)}]`,
        '      timeout_seconds: 10',
        '      tools:',
        '        allow: [echo, env]',
        '',
      ].join('\n'),
    );
    const child = spawn(
      process.execPath,
      [
        AMF,
        'worker',
        '--config',
        config,
        '--name',
        'tools-cli',
        '--tags',
        'tools-cli',
        '--handler',
        HANDLER,
        '--nats-url',
        mesh.coordinator.natsUrl,
        '--data-dir',
        mesh.config.dataDir,
        '--port',
        '0',
        '--no-mdns',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, AMF_LOG_LEVEL: 'silent' } },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await mesh.waitFor(
        () => mesh.coordinator.registry.isLive('spiffe://local/worker/tools-cli'),
        // A cold CLI start plus a stdio server start can take long on a busy CI machine.
        60_000,
        `CLI worker admitted (stderr: ${stderr})`,
      );
      expect(await ask('tools-cli', { list: true })).toEqual(['files__echo', 'files__env']);
      expect(await ask('tools-cli', { tool: 'files__echo', args: { text: 'from yaml' } })).toEqual({
        text: 'from yaml',
        isError: false,
      });
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  }, 120_000);
});
