/**
 * Child processes of bench/taskPath.js: spawned, awaited until a line on their stdout says they are
 * ready, stopped with SIGTERM (SIGKILL after a grace period), and killed if the bench itself exits
 * first, so a failed run leaves nothing behind.
 */
import { spawn } from 'node:child_process';
import process from 'node:process';
import { createInterface } from 'node:readline';
import { clearTimeout, setTimeout } from 'node:timers';

const STOP_GRACE_MS = 10_000;

/**
 * Spawns `command args` and resolves with `{ child, pid, line, stop() }` once a stdout line matches
 * `ready` (a RegExp; `line` is that line), or rejects when the process exits or `timeoutMs` passes
 * first. Later stdout is drained; stderr goes to this process's stderr unless `quiet`.
 * @param {string} command
 * @param {readonly string[]} args
 * @param {{ ready: RegExp, timeoutMs?: number, env?: NodeJS.ProcessEnv, quiet?: boolean, ipc?: boolean }} options
 */
export function startChild(
  command,
  args,
  { ready, timeoutMs = 60_000, env = process.env, quiet = false, ipc = false },
) {
  const stdio = /** @type {import('node:child_process').StdioOptions} */ ([
    'ignore',
    'pipe',
    quiet ? 'ignore' : 'inherit',
    ...(ipc ? ['ipc'] : []),
  ]);
  const child = spawn(command, args, { env, stdio });
  const alive = () => child.exitCode === null && child.signalCode === null;
  const kill = () => {
    if (alive()) child.kill('SIGKILL');
  };
  process.on('exit', kill);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (alive()) {
      child.kill('SIGTERM');
      const timer = setTimeout(kill, STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
    process.off('exit', kill);
  };
  // stdout is a pipe (stdio above), never null.
  const lines = createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) });
  const seen = [];
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (message) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void stop();
      reject(new Error(`${message}; its last output: ${seen.slice(-5).join(' | ').slice(0, 600)}`));
    };
    const timer = setTimeout(
      () => fail(`${command} ${args.join(' ')} was not ready within ${timeoutMs / 1000} s`),
      timeoutMs,
    );
    lines.on('line', (line) => {
      if (settled) return;
      seen.push(line);
      if (!ready.test(line)) return;
      settled = true;
      clearTimeout(timer);
      resolve({ child, pid: child.pid, line, stop });
    });
    child.once('exit', (code, signal) =>
      fail(`${command} ${args.join(' ')} exited during start-up (${signal ?? code})`),
    );
  });
}
