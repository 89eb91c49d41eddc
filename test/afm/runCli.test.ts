// End to end: `amf run` (the built CLI from dist/, a real child process) starts an example AFM agent
// whose model is the scripted OpenAI-compatible server (OPENAI_BASE_URL); the agent joins a running
// test mesh and answers /v1/chat/completions for model amf/<its tag> through the coordinator (the
// official openai client), streamed and not; its webchat is served on its worker port; SIGTERM ends
// it with a goodbye heartbeat and exit code 0.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';
import {
  lastToolResult,
  startScriptedOpenAiServer,
  type ScriptedServer,
} from '../helpers/scriptedOpenAiServer.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF_BIN = join(ROOT, 'bin/amf.js');

/** Waits for the child's output to match `pattern`, or fails when it exits first. */
function waitForOutput(
  child: ChildProcess,
  pattern: RegExp,
  seen: { out: string; err: string },
): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = pattern.exec(seen.out);
      if (m) {
        child.stdout!.off('data', check);
        child.off('exit', onExit);
        resolve(m);
      }
    };
    const onExit = (code: number | null) =>
      reject(new Error(`amf run exited (${code}) before ${pattern}: ${seen.err}`));
    child.stdout!.on('data', check);
    child.once('exit', onExit);
    check();
  });
}

describe('amf run FILE in a running mesh', () => {
  let mesh: TestMesh;
  let llm: ScriptedServer;
  let home: string;
  let child: ChildProcess;
  const seen = { out: '', err: '' };
  let agentId = '';
  let agentUrl = '';

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/runCommand.js')))
      throw new Error(
        'dist/ is missing or old: run `npx tsc -p tsconfig.json` (scripts/test.sh builds first)',
      );
    home = await mkdtemp(join(tmpdir(), 'amf-run-home-'));
    mesh = await startTestMesh();
    llm = await startScriptedOpenAiServer({
      apiKey: 'sk-e2e',
      script: [
        { toolCalls: [{ name: 'math__evaluate', arguments: { expression: '6 * 7' } }] },
        (req) => ({ text: `Multiply 6 by 7.\nAnswer: ${lastToolResult(req)}` }),
        { text: 'Count up in steps of nine.\nAnswer: 81', chunkSize: 4 },
        { text: 'Half of 10 is 5.' },
      ],
    });
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env))
      if (!k.startsWith('AMF_') && !k.startsWith('OPENAI_')) env[k] = v;
    Object.assign(env, { HOME: home, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'sk-e2e' });
    child = spawn(
      process.execPath,
      [
        AMF_BIN,
        'run',
        'examples/math-tutor.afm.md',
        '--coordinator',
        mesh.url,
        '--data-dir',
        mesh.config.dataDir,
        '--port',
        '0',
        '--no-mdns',
      ],
      { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    child.stdout!.on('data', (c: Buffer) => (seen.out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (seen.err += c.toString()));
    const m = await waitForOutput(child, /mesh +worker (\S+) serving math-tutor .*at (http:\/\/\S+)\)/, seen);
    agentId = m[1]!;
    agentUrl = m[2]!;
    await mesh.waitFor(() => mesh.coordinator.registry.isLive(agentId), 15_000, 'the AFM agent admitted');
  }, 60_000);

  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await llm?.close();
    await mesh?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('prints where it serves: webchat on the worker port, and the mesh worker with its tag', () => {
    expect(seen.out).toContain('AFM agent "math-tutor" v1.0.0');
    expect(seen.out).toContain(`webchat  POST ${agentUrl}/tutor`);
    // Which model endpoint it uses (the scripted server behind OPENAI_BASE_URL), never the key.
    expect(seen.out).toContain(`model    openai "gpt-4o-mini" at ${llm.url.replace(/\/$/, '')}`);
    expect(seen.out).not.toContain('sk-e2e');
  });

  it('answers model amf/math-tutor through the coordinator, using its MCP tools', async () => {
    const openai = new OpenAI({ baseURL: `${mesh.url}/v1`, apiKey: 'unused' });
    const completion = await openai.chat.completions.create({
      model: 'amf/math-tutor',
      messages: [{ role: 'user', content: 'What is 6 times 7?' }],
    });
    expect(completion.choices[0]!.message.content).toBe('Multiply 6 by 7.\nAnswer: 42');
    // The model saw the tutor's system prompt and the real tool result from mathServer.mjs.
    const calls = llm.modelCalls();
    expect(calls[0]!.body.messages[0].content).toContain('friendly math tutor');
    expect(lastToolResult(calls[1]!)).toBe('42');
  });

  it('streams an answer chunk by chunk through the coordinator', async () => {
    const openai = new OpenAI({ baseURL: `${mesh.url}/v1`, apiKey: 'unused' });
    const stream = await openai.chat.completions.create({
      model: 'amf/math-tutor',
      messages: [{ role: 'user', content: 'What is 9 * 9?' }],
      stream: true,
    });
    const chunks: string[] = [];
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content;
      if (delta) chunks.push(delta);
    }
    expect(chunks.join('')).toBe('Count up in steps of nine.\nAnswer: 81');
    expect(chunks.length).toBeGreaterThan(1);
  });

  it('serves its x-amf.mcp resource and prompt, and re-exports its math server, at its own /mcp', async () => {
    const client = new Client({ name: 'run-cli-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${agentUrl}/mcp`)));
    try {
      const method = await client.readResource({ uri: 'tutor://method' });
      expect(method.contents[0]).toMatchObject({
        mimeType: 'text/markdown',
        text: expect.stringContaining('Answer:'),
      });
      const prompt = await client.getPrompt({
        name: 'explain',
        arguments: { problem: '3/4 + 1/6', age: '11' },
      });
      expect(prompt.messages[0]!.content).toEqual({
        type: 'text',
        text: 'Explain step by step how to solve 3/4 + 1/6 for a student aged 11.',
      });
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toEqual(
        expect.arrayContaining(['math__evaluate', 'math__gcd_lcm', 'math__prime_factors']),
      );
    } finally {
      await client.close();
    }
  });

  it('serves its webchat on the same port', async () => {
    const res = await fetch(`${agentUrl}/tutor`, { method: 'POST', body: 'What is half of 10?' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('Half of 10 is 5.');
  });

  it('stops on SIGTERM: goodbye heartbeat, exit code 0', async () => {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    await mesh.waitForEvent(
      (e: ObservedEvent) =>
        e.event.type === 'amf.discovery.agent.heartbeat' &&
        (e.event.data.payload as { agent_id?: string; status?: string }).agent_id === agentId &&
        (e.event.data.payload as { status?: string }).status === 'offline',
      10_000,
      'the goodbye heartbeat',
    );
  });
});
