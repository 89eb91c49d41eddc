/**
 * An A2A task waiting for a person (input-required) outlives a restart of its coordinator: real
 * processes (`amf up` with its spawned nats-server, `amf worker` with a handler that asks for a
 * colour) and the official @a2a-js/sdk client. The coordinator is stopped while the task waits,
 * gracefully (SIGTERM) or killed with its nats-server (SIGKILL to its process group), then started
 * again on the same data dir and ports: GetTask still shows the task input-required, the follow-up
 * with the task's id goes on in the same handler run on the same worker, and the task completes.
 * The input TTL (`a2a.input_ttl_seconds`) is still enforced after a restart.
 * dist/ must be current: scripts/test.sh builds first; by hand, run `npm run build`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { SendMessageRequest, TaskState, type Task } from '@a2a-js/sdk';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import { freePort } from '../../scripts/lib/freePort.mjs';
import { AMF_BIN, cleanCliEnv, killSpawnedNats } from '../helpers/amfCli.js';

const HANDLER = fileURLToPath(new URL('./fixtures/askHandler.mjs', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Proc {
  child: ChildProcess;
  output: string;
  exited: Promise<void>;
}

/** Polls `check` (every 100 ms) until it gives a value, or throws with `what` after `ms`. */
async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  ms: number,
  what: string | (() => string),
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const started: Proc[] = [];
const dirs: string[] = [];

/** `amf ...args` in a process group of its own (its nats-server joins it), output kept. */
function amf(args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, [AMF_BIN, ...args], {
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc: Proc = {
    child,
    output: '',
    exited: new Promise((resolve) => child.once('exit', () => resolve())),
  };
  for (const stream of [child.stdout!, child.stderr!])
    stream.on('data', (chunk: Buffer) => (proc.output += chunk.toString('utf8')));
  started.push(proc);
  return proc;
}

function killGroup(proc: Proc, signal: NodeJS.Signals): void {
  try {
    process.kill(-proc.child.pid!, signal);
  } catch {
    // already gone
  }
}

async function stopAll(): Promise<void> {
  for (const p of started.splice(0)) {
    killGroup(p, 'SIGKILL');
    await p.exited;
  }
}

afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  for (const d of dirs.splice(0)) {
    await killSpawnedNats(d);
    await rm(d, { recursive: true, force: true });
  }
});

interface Mesh {
  dataDir: string;
  env: NodeJS.ProcessEnv;
  port: number;
  natsPort: number;
  url: string;
}

async function newMesh(inputTtlSeconds?: number): Promise<Mesh> {
  if (!existsSync(join(ROOT, 'dist/cli/main.js')))
    throw new Error('dist/ is missing: run `npm run build` (scripts/test.sh builds first)');
  const dataDir = await mkdtemp(join(tmpdir(), 'amf-input-restart-'));
  dirs.push(dataDir);
  if (inputTtlSeconds !== undefined)
    await writeFile(join(dataDir, 'amf.yaml'), `a2a:\n  input_ttl_seconds: ${inputTtlSeconds}\n`);
  const port = await freePort();
  const natsPort = await freePort();
  return { dataDir, env: cleanCliEnv(dataDir), port, natsPort, url: `http://127.0.0.1:${port}` };
}

/** Starts (or starts again) the coordinator of `mesh`, on its data dir and ports. */
async function up(mesh: Mesh): Promise<Proc> {
  const args = ['up', '--no-mdns', '--data-dir', mesh.dataDir, '--port', String(mesh.port)];
  const proc = amf([...args, '--nats-port', String(mesh.natsPort)], mesh.env);
  await waitFor(
    () => proc.output.includes('AMF coordinator http://'),
    60_000,
    () => `amf up to serve:\n${proc.output}`,
  );
  return proc;
}

/** The worker whose handler asks for a colour, joined to `mesh` by its data dir. */
async function askingWorker(mesh: Mesh): Promise<Proc> {
  const args = ['worker', '--name', 'asker', '--tags', 'ask', '--port', '0', '--no-mdns'];
  const proc = amf(
    [...args, '--coordinator', mesh.url, '--data-dir', mesh.dataDir, '--handler', HANDLER],
    mesh.env,
  );
  await waitFor(
    async () => {
      const res = await fetch(`${mesh.url}/.well-known/agent-card.json`).catch(() => undefined);
      const card = res?.ok ? ((await res.json()) as { skills?: { id: string }[] }) : undefined;
      return card?.skills?.some((s) => s.id === 'ask') === true;
    },
    60_000,
    () => `the worker admitted:\n${proc.output}`,
  );
  return proc;
}

async function client(mesh: Mesh): Promise<Client> {
  return new ClientFactory().createFromUrl(mesh.url);
}

function message(text: string, taskId?: string): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: {
      messageId: crypto.randomUUID(),
      role: 'ROLE_USER',
      parts: [{ text }],
      ...(taskId ? { taskId } : { metadata: { tag: 'ask' } }),
    },
  });
}

function answerText(task: Task): string {
  return task.artifacts
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .join('');
}

function statusText(task: Task): string {
  const part = task.status?.message?.parts[0]?.content;
  return part?.$case === 'text' ? part.value : '';
}

/** Stops the coordinator: SIGTERM to it alone (a clean stop), or SIGKILL to its group (a crash). */
async function stop(proc: Proc, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  if (signal === 'SIGTERM') proc.child.kill('SIGTERM');
  else killGroup(proc, 'SIGKILL');
  await proc.exited;
}

describe.each(['SIGTERM', 'SIGKILL'] as const)(
  'an input-required A2A task across a coordinator restart (%s)',
  (signal) => {
    it(
      'is still input-required, takes the follow-up on the same worker and completes',
      {
        timeout: 240_000,
      },
      async () => {
        const mesh = await newMesh();
        const first = await up(mesh);
        const worker = await askingWorker(mesh);
        const asked = (await (await client(mesh)).sendMessage(message('start'))) as Task;
        expect(asked.status?.state, statusText(asked)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        expect(statusText(asked)).toBe('what colour?');

        await stop(first, signal);
        expect(worker.child.exitCode).toBeNull();
        const second = await up(mesh);
        const again = await client(mesh);
        const shown = await again.getTask({ tenant: '', id: asked.id, historyLength: 10 });
        expect(shown.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        expect(statusText(shown)).toBe('what colour?');

        // The worker reconnects to the restarted nats-server by itself; its handler still waits.
        const done = await waitFor(
          async () => {
            try {
              return (await again.sendMessage(message('blue', asked.id))) as Task;
            } catch (err) {
              // Until the worker is back on NATS the follow-up has no subject to go to; it is refused.
              if (String(err).includes('not waiting for input')) return undefined;
              throw err;
            }
          },
          60_000,
          () => `the follow-up taken:\n${second.output}\n${worker.output}`,
        );
        expect(done.id).toBe(asked.id);
        expect(done.status?.state, statusText(done)).toBe(TaskState.TASK_STATE_COMPLETED);
        // One handler run: it saw the first message and the follow-up.
        expect(answerText(done)).toBe('colour blue (start)');
        const final = await again.getTask({ tenant: '', id: asked.id, historyLength: 10 });
        expect(final.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      },
    );
  },
);

describe('the input TTL across a restart', () => {
  it('still fails the task when nobody answers in time', { timeout: 240_000 }, async () => {
    const mesh = await newMesh(10);
    const first = await up(mesh);
    await askingWorker(mesh);
    const asked = (await (await client(mesh)).sendMessage(message('start'))) as Task;
    expect(asked.status?.state, statusText(asked)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    await stop(first, 'SIGTERM');
    await up(mesh);
    const again = await client(mesh);
    const failed = await waitFor(
      async () => {
        const t = await again.getTask({ tenant: '', id: asked.id, historyLength: 0 });
        return t.status?.state === TaskState.TASK_STATE_FAILED ? t : undefined;
      },
      60_000,
      'the task to fail at its input TTL',
    );
    expect(statusText(failed)).toMatch(/a2a\.input_ttl_seconds/);
    await expect(again.sendMessage(message('too late', asked.id))).rejects.toThrow();
  });
});
