// `amf run --no-mesh` as a real child process (the built CLI from dist/): refusals with clear
// messages and exit 1, the console chat on piped stdin (`--console`), and a webhook agent answering
// a signed delivery, then stopping cleanly on SIGINT. The model is the scripted OpenAI-compatible server.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBody } from '../../src/afm/interfaces/webhookSignature.js';
import {
  lastToolResult,
  startScriptedOpenAiServer,
  type ScriptedServer,
} from '../helpers/scriptedOpenAiServer.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF_BIN = join(ROOT, 'bin/amf.js');

interface Run {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
}

describe('amf run --no-mesh', () => {
  let llm: ScriptedServer;
  let dir: string;
  const env: NodeJS.ProcessEnv = {};

  function amfRun(args: string[], extraEnv: NodeJS.ProcessEnv = {}): Run {
    const child = spawn(process.execPath, [AMF_BIN, 'run', ...args], {
      cwd: ROOT,
      env: { ...env, ...extraEnv },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return { child, out: () => out, err: () => err, exit };
  }

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/runCommand.js')))
      throw new Error(
        'dist/ is missing or old: run `npx tsc -p tsconfig.json` (scripts/test.sh builds first)',
      );
    dir = await mkdtemp(join(tmpdir(), 'amf-run-standalone-'));
    llm = await startScriptedOpenAiServer({ apiKey: 'sk-cli' });
    for (const [k, v] of Object.entries(process.env))
      if (!k.startsWith('AMF_') && !k.startsWith('OPENAI_')) env[k] = v;
    Object.assign(env, { HOME: dir, AMF_DATA_DIR: dir, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'sk-cli' });
  });
  afterAll(async () => {
    await llm?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'exits 1 naming the problem for a missing file, an invalid file, and nothing to serve',
    { timeout: 60_000 },
    async () => {
      const bad = join(dir, 'bad.afm.md');
      await writeFile(bad, '---\nmax_iterations: lots\n---\n# Role\nx\n\n# Instructions\ny\n');
      const consoleOnly = join(dir, 'console.afm.md');
      await writeFile(consoleOnly, '---\nmodel: { name: m }\n---\n# Role\nx\n\n# Instructions\ny\n');
      // Three CLI starts side by side (each loads the whole CLI).
      const missing = amfRun(['nope.afm.md', '--no-mesh']);
      const invalid = amfRun([bad, '--no-mesh']);
      const idle = amfRun([consoleOnly, '--no-mesh']);
      idle.child.stdin!.end();
      expect(await missing.exit).toBe(1);
      expect(missing.err()).toContain('nope.afm.md:1:1: file not found');
      expect(await invalid.exit).toBe(1);
      expect(invalid.err()).toMatch(/bad\.afm\.md:2:\d+: .*max_iterations/);
      expect(await idle.exit).toBe(1);
      expect(idle.err()).toContain('nothing to serve');
      expect(llm.modelCalls()).toHaveLength(0);
    },
  );

  it(
    '--console answers piped lines with the agent and its tools, and exits when stdin ends',
    { timeout: 60_000 },
    async () => {
      llm.push({ toolCalls: [{ name: 'math__prime_factors', arguments: { n: 360 } }] }, (req) => ({
        text: `360 = ${lastToolResult(req)}`,
      }));
      const run = amfRun(['examples/math-tutor.afm.md', '--no-mesh', '--console', '--port', '0']);
      run.child.stdin!.end('Factor 360 please\n');
      expect(await run.exit, run.err()).toBe(0);
      expect(run.out()).toBe('360 = 2 × 2 × 2 × 3 × 3 × 5\n');
      // The banner went to stderr so the answers on stdout stay clean.
      expect(run.err()).toContain('AFM agent "math-tutor"');
    },
  );

  it('serves a webhook agent until SIGINT', { timeout: 60_000 }, async () => {
    llm.push({
      text: JSON.stringify({ severity: 'low', component: 'docs', labels: ['docs'], summary: 'Typo' }),
    });
    const run = amfRun(['examples/webhook-triage.afm.md', '--no-mesh', '--port', '0'], {
      TRIAGE_WEBHOOK_SECRET: 'cli-secret',
    });
    await new Promise<void>((resolve, reject) => {
      const check = () => (/webhook +POST /.test(run.out()) ? resolve() : undefined);
      run.child.stdout!.on('data', check);
      void run.exit.then((code) => reject(new Error(`exited ${code}: ${run.err()}`)));
    });
    const url = /webhook +POST (\S+)/.exec(run.out())![1]!;
    const payload = JSON.stringify({
      action: 'opened',
      repository: { full_name: 'acme/docs' },
      issue: { number: 1, title: 'Typo', body: 'teh', user: { login: 'kim' } },
    });
    const res = await fetch(url, {
      method: 'POST',
      body: payload,
      headers: { 'x-github-event': 'issues', 'x-hub-signature-256': signBody('cli-secret', payload) },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ severity: 'low', summary: 'Typo' });
    run.child.kill('SIGINT');
    expect(await run.exit).toBe(0);
  });

  it(
    'warns with the file position when an MCP server cannot start, and serves without it',
    { timeout: 60_000 },
    async () => {
      const file = join(dir, 'broken-tools.afm.md');
      await writeFile(
        file,
        [
          '---',
          'model: { name: m }',
          'interfaces:',
          '  - type: webchat',
          'tools:',
          '  mcp:',
          '    - name: ghost',
          '      transport: { type: stdio, command: /nonexistent/mcp-server }',
          '---',
          '# Role',
          'x',
          '',
          '# Instructions',
          'y',
          '',
        ].join('\n'),
      );
      const run = amfRun([file, '--no-mesh', '--port', '0']);
      await new Promise<void>((resolve, reject) => {
        const check = () => (/webchat +POST /.test(run.out()) ? resolve() : undefined);
        run.child.stdout!.on('data', check);
        void run.exit.then((code) => reject(new Error(`exited ${code}: ${run.err()}`)));
      });
      expect(run.err()).toMatch(/broken-tools\.afm\.md:7:\d+: warning: MCP server "ghost" is not available/);
      run.child.kill('SIGINT');
      expect(await run.exit).toBe(0);
    },
  );
});
