// The built CLI (bin/amf.js -> dist/): `amf up` with external A2A agents in amf.yaml (one reachable
// @a2a-js/sdk reference agent, one unreachable: logged, not fatal), `amf send` reaching the bridged
// agent through the mesh, and `amf a2a send` against the reference agent (blocking, --stream, --json).
// dist/ must be current: scripts/test.sh builds first; by hand, run `npx tsc -p tsconfig.json`.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceAgent, type ReferenceAgent } from './referenceAgent.js';
import { freePort } from '../../scripts/lib/freePort.mjs';
import { readOperatorKey } from '../../src/identity/operatorKey.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF_BIN = join(ROOT, 'bin/amf.js');

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

function cleanEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AMF_')) env[k] = v;
  env.HOME = home;
  return env;
}

// Every CLI run starts a Node process: on a loaded machine that alone takes seconds.
const CLI_TEST_TIMEOUT_MS = 240_000;

describe(
  'amf up with external A2A agents, amf send and amf a2a send',
  { timeout: CLI_TEST_TIMEOUT_MS },
  () => {
    let home: string;
    let ref: ReferenceAgent;
    let up: ChildProcess;
    let upStdout = '';
    let upStderr = '';
    let coordinatorUrl: string;

    function amf(args: string[]): Promise<CliRun> {
      return new Promise((resolve) => {
        execFile(
          process.execPath,
          [AMF_BIN, ...args],
          { env: cleanEnv(home), timeout: 90_000 },
          (err, stdout, stderr) => {
            const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
            resolve({ code, stdout, stderr });
          },
        );
      });
    }

    async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 90_000) {
      const deadline = Date.now() + timeoutMs;
      while (!(await check())) {
        if (Date.now() > deadline)
          throw new Error(`timed out waiting for ${what}\nstdout: ${upStdout}\nstderr: ${upStderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }

    beforeAll(async () => {
      if (!existsSync(join(ROOT, 'dist/cli/a2aCommand.js')))
        throw new Error(
          'dist/ is missing or stale: run `npx tsc -p tsconfig.json` (scripts/test.sh builds first)',
        );
      home = await mkdtemp(join(tmpdir(), 'amf-a2a-cli-'));
      ref = await startReferenceAgent({ name: 'Shouter', skills: [{ id: 'shout', tags: ['loud'] }] });
      const downPort = await freePort();
      const dataDir = join(home, 'data');
      await rm(dataDir, { recursive: true, force: true });
      const { mkdir } = await import('node:fs/promises');
      await mkdir(dataDir, { recursive: true });
      await writeFile(
        join(dataDir, 'amf.yaml'),
        [
          'log_level: info',
          'heartbeat: { interval_seconds: 1 }',
          'a2a:',
          '  agents:',
          `    - { name: shouter, url: "${ref.url}" }`,
          `    - { name: down, url: "http://127.0.0.1:${downPort}" }`,
          '',
        ].join('\n'),
      );
      up = spawn(
        process.execPath,
        [AMF_BIN, 'up', '--port', '0', '--nats-port', '0', '--no-mdns', '--data-dir', dataDir],
        { env: cleanEnv(home), stdio: ['ignore', 'pipe', 'pipe'] },
      );
      up.stdout!.on('data', (d: Buffer) => (upStdout += d.toString()));
      up.stderr!.on('data', (d: Buffer) => (upStderr += d.toString()));
      await waitFor(() => /AMF coordinator (http:\/\/\S+)/.test(upStdout), 'amf up to print its URL');
      coordinatorUrl = /AMF coordinator (http:\/\/\S+)/.exec(upStdout)![1]!;
    }, CLI_TEST_TIMEOUT_MS);

    afterAll(async () => {
      if (up && up.exitCode === null) {
        const exited = new Promise((r) => up.once('exit', r));
        up.kill('SIGTERM');
        await exited;
      }
      await ref?.close();
      if (home) await rm(home, { recursive: true, force: true });
    }, CLI_TEST_TIMEOUT_MS);

    it('boots with an unreachable agent: the failure is logged, the coordinator serves', async () => {
      expect(upStdout).toContain(`A2A agent     shouter at ${ref.url}`);
      await waitFor(
        () => upStderr.includes('A2A agent unreachable; will retry'),
        'the unreachable agent logged',
      );
      const line = upStderr.split('\n').find((l) => l.includes('A2A agent unreachable'))!;
      expect(JSON.parse(line)).toMatchObject({ agent: 'down', level: 40 });
      const health = await fetch(`${coordinatorUrl}/health`);
      expect(health.status).toBe(200);
    });

    it('prints the console URL carrying the generated operator key once, in the fragment', async () => {
      const key = await readOperatorKey(join(home, 'data'));
      expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const lines = upStdout.split('\n');
      expect(lines).toContain(`  console       ${coordinatorUrl}/#token=${key}`);
      expect(lines.filter((l) => l.includes(key!))).toHaveLength(1);
      expect(upStdout).toContain(`operator key  ${join(home, 'data', 'operator.key')}`);
    });

    it('amf send --tag reaches the bridged external agent through the mesh', async () => {
      await waitFor(async () => {
        // `amf up` generated the operator key into its data dir, where the owner's CLI reads it.
        const key = await readOperatorKey(join(home, 'data'));
        const res = await fetch(`${coordinatorUrl}/agents`, { headers: { authorization: `Bearer ${key}` } });
        const body = (await res.json()) as { agents: Array<{ agent_id: string; status: string }> };
        return body.agents.some((a) => a.agent_id.endsWith('/worker/a2a-shouter') && a.status === 'live');
      }, 'the bridge worker admitted');
      const run = await amf(['send', '--tag', 'loud', '--coordinator', coordinatorUrl, 'hello', 'mesh']);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout.trim()).toBe('ref: HELLO MESH');
      const blocking = await amf([
        'send',
        '--no-stream',
        '--tag',
        'shout',
        '--coordinator',
        coordinatorUrl,
        'again',
      ]);
      expect(blocking.stdout.trim()).toBe('ref: AGAIN');
    });

    it('amf a2a send talks to the agent directly: blocking, --stream, --json', async () => {
      const plain = await amf(['a2a', 'send', ref.url, 'direct', 'call']);
      expect(plain.code, plain.stderr).toBe(0);
      expect(plain.stdout).toBe('ref: DIRECT CALL\n');

      const streamed = await amf(['a2a', 'send', '--stream', ref.url, 'streamed']);
      expect(streamed.code, streamed.stderr).toBe(0);
      expect(streamed.stdout).toBe('ref: STREAMED\n');

      const json = await amf(['a2a', 'send', '--json', ref.url, 'as json']);
      expect(json.code, json.stderr).toBe(0);
      expect(JSON.parse(json.stdout)).toMatchObject({
        agent: 'Shouter',
        protocol: { binding: 'JSONRPC', version: '1.0' },
        kind: 'task',
        state: 'completed',
        text: 'ref: AS JSON',
        task_id: expect.any(String),
      });

      const lines = await amf(['a2a', 'send', '--stream', '--json', ref.url, 'lines']);
      const events = lines.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { delta?: string; progress?: string; final?: boolean; text?: string });
      expect(events.filter((e) => e.delta).map((e) => e.delta)).toEqual(['ref:', ' LINES']);
      expect(events.some((e) => e.progress === 'thinking')).toBe(true);
      expect(events.at(-1)).toMatchObject({ final: true, state: 'completed', text: 'ref: LINES' });
    });

    it('amf a2a send exits 1 with the reason: failed task, unreachable agent', async () => {
      const failed = await amf(['a2a', 'send', ref.url, 'fail: out of ink']);
      expect(failed.code).toBe(1);
      expect(failed.stdout).toContain('out of ink');
      expect(failed.stderr).toContain('the task ended failed');

      const port = await freePort();
      const down = await amf(['a2a', 'send', `http://127.0.0.1:${port}`, 'hi']);
      expect(down.code).toBe(1);
      expect(down.stderr).toMatch(/cannot reach A2A agent .*ECONNREFUSED/);
    });
  },
);
