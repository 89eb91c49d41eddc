/**
 * Shared plumbing of the protocol benchmarks (bench/mcp.js, bench/a2a.js): numeric settings from the
 * environment, and the mesh under test (bench/meshServer.js) as a child process that prints one JSON
 * line with its URLs when it is ready and shuts down on an IPC message.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = new URL('../../', import.meta.url);

/** Exits with a clear message when dist/ has not been built. */
export function requireBuild(script) {
  if (!existsSync(new URL('dist/coordinator/coordinator.js', ROOT))) {
    process.stderr.write(`${script}: dist/ is missing: run \`npm run build\` first\n`);
    process.exit(2);
  }
}

/** A number from the environment, or `fallback`; anything else ends the run with a message. */
export function envNumber(script, name, fallback, min = 0) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) {
    process.stderr.write(`${script}: ${name}=${raw} is not a number >= ${min}\n`);
    process.exit(2);
  }
  return n;
}

/** A comma-separated list of concurrencies from the environment (default "1,32"). */
export function envConcurrencies(name, fallback = '1,32') {
  return (process.env[name] ?? fallback)
    .split(',')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n >= 1 && n <= 1024);
}

/**
 * Starts bench/meshServer.js. The agent runs in a process of its own by default, as in a real mesh:
 * otherwise the coordinator path would be charged for the worker's CPU once per hop it shares.
 * Resolves with `{ info, stop }`; the child is killed if this process exits first.
 * @param {{ childFlags?: string[], startTimeoutMs?: number }} [options]
 */
export function startMeshProcess({ childFlags = [], startTimeoutMs = 60_000 } = {}) {
  const script = fileURLToPath(new URL('bench/meshServer.js', ROOT));
  const child = spawn(process.execPath, ['--expose-gc', ...childFlags, script], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env: { ...process.env, BENCH_SEPARATE_WORKER: process.env.BENCH_SEPARATE_WORKER ?? '1' },
  });
  const alive = () => child.exitCode === null && child.signalCode === null;
  process.on('exit', () => {
    if (alive()) child.kill('SIGKILL');
  });
  const stop = async () => {
    if (!alive()) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.send({ cmd: 'shutdown' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
  // stdout is a pipe, never null.
  const lines = createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the mesh did not start within ${startTimeoutMs / 1000} s`)),
      startTimeoutMs,
    );
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve({ info: JSON.parse(line), stop });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the mesh process exited during start-up (${signal ?? code})`));
    });
  });
}
