// The built `amf` CLI (bin/amf.js -> dist/) as child processes against a running test mesh.
// dist/ must be current: scripts/test.sh builds before the tests; by hand, run `npx tsc -p tsconfig.json`.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF_BIN = join(ROOT, 'bin/amf.js');
const PACKAGE_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

describe('amf CLI against a running mesh', () => {
  let mesh: TestMesh;
  let echo: RunningWorker;
  let home: string;

  /** Runs `amf ...args` with a clean AMF_* environment and a temp HOME; never rejects. */
  function amf(args: string[]): Promise<CliRun> {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AMF_')) env[k] = v;
    env.HOME = home;
    return new Promise((resolve) => {
      execFile(process.execPath, [AMF_BIN, ...args], { env, timeout: 20_000 }, (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      });
    });
  }

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js')))
      throw new Error('dist/ is missing: run `npx tsc -p tsconfig.json` (scripts/test.sh builds first)');
    home = await mkdtemp(join(tmpdir(), 'amf-cli-home-'));
    mesh = await startTestMesh();
    echo = await mesh.startWorker('echo-cli', ['echo'], echoHandler);
  });
  afterAll(async () => {
    await mesh?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('amf --version prints the package version', async () => {
    const run = await amf(['--version']);
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(PACKAGE_VERSION);
  });

  it('amf agents lists the worker with its status and tags (the operator key read from the data dir)', async () => {
    const run = await amf(['agents', '--coordinator', mesh.url, '--data-dir', mesh.config.dataDir]);
    expect(run.code, run.stderr).toBe(0);
    const line = run.stdout.split('\n').find((l) => l.includes(echo.worker.agentId));
    expect(line, run.stdout).toBeDefined();
    expect(line).toMatch(/^live\s/);
    expect(line).toContain('echo');
    expect(line).toContain(echo.url);
  });

  it('amf agents without the operator key is refused and says where the key is', async () => {
    // HOME is a fresh temp dir: its default data dir holds no operator.key.
    const run = await amf(['agents', '--coordinator', mesh.url]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('HTTP 401');
    expect(run.stderr).toContain('operator.key');
    expect(run.stderr).toContain('AMF_API_KEY');
  });

  it('amf up --help prefers AMF_API_KEY to --api-key', async () => {
    const help = await amf(['up', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--api-key <key>[\s\S]*prefer\s+AMF_API_KEY/);
  });

  it('amf -V prints the version too, and amf --help lists every command', async () => {
    expect((await amf(['-V'])).stdout.trim()).toBe(PACKAGE_VERSION);
    const help = await amf(['--help']);
    expect(help.code).toBe(0);
    // Every command is registered even though each loads its module only when it runs.
    for (const command of ['up', 'worker', 'agents', 'audit', 'mcp', 'a2a', 'validate', 'run'])
      expect(help.stdout).toMatch(new RegExp(`\\n\\s+${command}\\b`));
  });

  it('amf agents says why when no coordinator answers (exit 1)', async () => {
    const run = await amf(['agents', '--coordinator', 'http://127.0.0.1:1']);
    expect(run.code).toBe(1);
    // Names the URL it could not reach, why, and what to do.
    expect(run.stderr).toMatch(
      /cannot reach the coordinator at http:\/\/127\.0\.0\.1:1 \(connection refused\)/,
    );
    expect(run.stderr).toMatch(/amf up/);
  });

  it('amf agents --json prints parseable JSON', async () => {
    const run = await amf(['agents', '--json', '--coordinator', mesh.url, '--data-dir', mesh.config.dataDir]);
    expect(run.code, run.stderr).toBe(0);
    const body = JSON.parse(run.stdout) as {
      agents: Array<{ agent_id: string; status: string; capability_tags: string[] }>;
    };
    expect(body.agents).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ agent_id: echo.worker.agentId, status: 'live', capability_tags: ['echo'] }),
      ]),
    );
  });

  it('amf send streams the answer, and --no-stream waits for it', async () => {
    const streamed = await amf(['send', '--tag', 'echo', '--coordinator', mesh.url, 'hello', 'world']);
    expect(streamed.code, streamed.stderr).toBe(0);
    expect(streamed.stdout).toBe('hello world\n');
    const whole = await amf([
      'send',
      '--tag',
      'echo',
      '--no-stream',
      '--coordinator',
      mesh.url,
      'hello',
      'world',
    ]);
    expect(whole.code, whole.stderr).toBe(0);
    expect(whole.stdout).toBe('hello world\n');
    // Both really went through the mesh: two final results of the echo worker with that text.
    const finals = mesh.events.filter(
      (e) =>
        e.subject === 'amf.result.final' &&
        (e.event.data.payload as { agent_id?: string; result?: { text?: string } }).agent_id ===
          echo.worker.agentId &&
        (e.event.data.payload as { result?: { text?: string } }).result?.text === 'hello world',
    );
    expect(finals).toHaveLength(2);
  });

  it('amf send for a tag nobody serves exits 1 and names the model', async () => {
    const run = await amf(['send', '--tag', 'nope', '--coordinator', mesh.url, 'anyone?']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('amf/nope');
    expect(run.stderr).toContain('404');
  });

  it('amf publish sends a valid event that appears on the fabric', async () => {
    const run = await amf([
      'publish',
      'amf.evidence.publish',
      '--data',
      '{"note":"x"}',
      '--coordinator',
      mesh.url,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const reply = JSON.parse(run.stdout) as { accepted: boolean; id: string; subject: string };
    expect(reply).toMatchObject({ accepted: true, subject: 'amf.evidence.publish' });
    const seen = await mesh.waitForEvent((e) => e.event.id === reply.id, 10_000, 'the published event');
    expect(seen.subject).toBe('amf.evidence.publish');
    expect(seen.event.data.payload).toEqual({ note: 'x' });
  });

  it('amf publish refuses an unknown type and bad --data with exit 1', async () => {
    const bogus = await amf(['publish', 'amf.bogus', '--data', '{}', '--coordinator', mesh.url]);
    expect(bogus.code).toBe(1);
    expect(bogus.stderr).toContain('amf.bogus');
    const badData = await amf([
      'publish',
      'amf.evidence.publish',
      '--data',
      '{not json',
      '--coordinator',
      mesh.url,
    ]);
    expect(badData.code).toBe(1);
    expect(badData.stderr).toMatch(/--data is not valid JSON/);
  });

  it('amf doctor prints a report with a nats-server check', async () => {
    const dataDir = join(home, 'doctor-data');
    const run = await amf(['doctor', '--data-dir', dataDir]);
    expect([0, 1]).toContain(run.code);
    const lines = run.stdout.split('\n');
    // The mesh itself runs on nats-server, so the check must find it (a warning for a 2.9 server).
    expect(
      lines.find((l) => /^\S+ nats-server: /.test(l)),
      run.stdout,
    ).toMatch(/^[✓!] nats-server: nats-server \d+\.\d+\.\d+/);
    expect(lines.some((l) => l.includes('data-dir') && l.includes(dataDir))).toBe(true);
    // The exit code follows the report: 1 exactly when a check failed.
    expect(run.code).toBe(lines.some((l) => l.startsWith('✗')) ? 1 : 0);
  });
});
