// The built `amf` CLI (bin/amf.js -> dist/) as a child process that keeps running (`amf events`,
// `amf worker`, `amf send` while it streams): its output so far, waiting on a line, and its end.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const AMF_BIN = join(ROOT, 'bin/amf.js');

/** `process.env` without AMF_* variables, with `HOME` set: a CLI that reads only what it is given. */
export function cleanCliEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AMF_')) env[k] = v;
  env.HOME = home;
  return env;
}

/** A CLI process that keeps running (`amf events`, `amf worker`): its output so far, and its end. */
export interface RunningCli {
  child: ChildProcess;
  out: { stdout: string; stderr: string };
  /** Resolves with the first match of `pattern` in stdout or stderr; rejects if the process ends first. */
  waitFor(stream: 'stdout' | 'stderr', pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited: Promise<number | null>;
}

/** Spawns `amf ...args` with `env`; the caller ends it. */
export function spawnAmf(args: string[], env: NodeJS.ProcessEnv): RunningCli {
  const child = spawn(process.execPath, [AMF_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  const listeners = new Set<() => void>();
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      resolve(code);
      for (const l of [...listeners]) l();
    }),
  );
  for (const stream of ['stdout', 'stderr'] as const)
    child[stream]!.on('data', (chunk: Buffer) => {
      out[stream] += chunk.toString('utf8');
      for (const l of [...listeners]) l();
    });
  let ended = false;
  void exited.then(() => (ended = true));
  return {
    child,
    out,
    exited,
    waitFor(stream, pattern, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(
            new Error(`no ${pattern} on ${stream} within ${timeoutMs} ms:\n${out.stdout}\n${out.stderr}`),
          );
        }, timeoutMs);
        const check = () => {
          const m = pattern.exec(out[stream]);
          if (m || ended) {
            clearTimeout(timer);
            listeners.delete(check);
            if (m) resolve(m);
            else reject(new Error(`amf ${args[0]} ended before ${pattern}:\n${out.stdout}\n${out.stderr}`));
          }
        };
        listeners.add(check);
        check();
      });
    },
  };
}

/**
 * Kills the nats-servers that coordinators with `dataDir` spawned. A spawned server runs in its own
 * process group and outlives a coordinator that is killed (the next `amf up` on the data dir takes
 * it over), so a test that kills coordinators leaves it running unless it ends it too. The server
 * names its pid in its ports file (`<dataDir>/nats/nats-server_<pid>.ports`).
 */
export async function killSpawnedNats(dataDir: string): Promise<void> {
  const files = await readdir(join(dataDir, 'nats')).catch(() => [] as string[]);
  for (const file of files) {
    const pid = /^nats-server_(\d+)\.ports$/.exec(file)?.[1];
    if (!pid) continue;
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
