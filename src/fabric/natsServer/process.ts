/**
 * The nats-server child process: finding the binary, spawning it in its own process group (killed
 * if this process exits without closing it), keeping its last log lines, stopping it, and waiting
 * for the ports file that says it listens.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { access, readdir, readFile } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { NatsPortInUseError, NatsServerMissingError, portOwnerOf } from './errors.js';
import { AmfError } from '../../errors.js';

/** How long a server is given to end after SIGTERM before it gets SIGKILL. */
export const STOP_GRACE_MS = 5_000;
/** How often readiness and exits are polled. */
export const POLL_MS = 20;
const KEPT_LOG_LINES = 20;

/** Children still running; killed synchronously if this process exits without closing them. */
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

function killLiveChildren(): void {
  for (const child of liveChildren) child.kill('SIGKILL');
}

/** A spawned nats-server process. */
export interface SpawnedServer {
  pid: number;
  /** Set once the child has exited; readiness polling checks it. */
  exitInfo: () => string | undefined;
  exited: Promise<void>;
  lastLines: () => string;
  stop: () => Promise<void>;
}

/** Spawns nats-server; resolves once the process runs. Log lines go to `logger`. */
export async function spawnServer(
  requested: string,
  binary: string,
  args: string[],
  logger: ((line: string) => void) | undefined,
): Promise<SpawnedServer> {
  // Its own process group: a Ctrl-C in the terminal signals the whole foreground group, and a server
  // that dies with it leaves the coordinator draining into a dead connection. The coordinator stops
  // it last, after its clients have drained; the exit hook below and the pid file cover the rest.
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', () => resolve());
    // Kept for the child's lifetime: a later 'error' (e.g. a failed kill) must not crash the process.
    child.on('error', (err: NodeJS.ErrnoException) => {
      reject(err.code === 'ENOENT' ? new NatsServerMissingError(requested, { cause: err }) : err);
      logger?.(`nats-server process error: ${err.message}`);
    });
  });
  const pid = child.pid as number;
  liveChildren.add(child);
  if (!exitHookInstalled) {
    process.on('exit', killLiveChildren);
    exitHookInstalled = true;
  }

  const lines: string[] = [];
  const onLine = (line: string): void => {
    lines.push(line);
    if (lines.length > KEPT_LOG_LINES) lines.shift();
    logger?.(line);
  };
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream, crlfDelay: Infinity }).on('line', onLine);
  }

  let exitDescription: string | undefined;
  // 'close' (not 'exit') so the stdio pipes are drained and no handle outlives stop().
  const exited = new Promise<void>((resolve) => {
    child.once('close', (code, signal) => {
      exitDescription = signal !== null ? `signal ${signal}` : `code ${String(code)}`;
      liveChildren.delete(child);
      resolve();
    });
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (exitDescription !== undefined) return;
      child.kill('SIGTERM');
      // Aborted once the race is decided, so no grace timer outlives close().
      const grace = new AbortController();
      const timer = delay(STOP_GRACE_MS, 'timeout' as const, { signal: grace.signal }).catch(
        () => 'aborted' as const,
      );
      const winner = await Promise.race([exited.then(() => 'exited' as const), timer]);
      grace.abort();
      if (winner === 'timeout') {
        child.kill('SIGKILL');
        await exited;
      }
    })();
    return stopping;
  };

  return { pid, exitInfo: () => exitDescription, exited, lastLines: () => lines.join('\n'), stop };
}

/**
 * Polls for the ports file nats-server writes once its listener is up (a file is the only
 * readiness signal the server offers without enabling the monitoring port). The file is written
 * non-atomically, so an unparsable read just means "not yet".
 */
export async function waitForPortsFile(
  server: SpawnedServer,
  dir: string,
  timeoutMs: number,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  const suffix = `_${server.pid}.ports`;
  for (;;) {
    const exit = server.exitInfo();
    if (exit !== undefined) {
      const bindFailure = /listen.*bind: address already in use|address already in use/i.exec(
        server.lastLines(),
      );
      if (bindFailure)
        throw new NatsPortInUseError(server.lastLines(), await portOwnerOf(server.lastLines()));
      throw new AmfError(
        'UNAVAILABLE',
        `nats-server exited (${exit}) before it was ready; last output:\n${server.lastLines()}`,
      );
    }
    const port = await readPortsFile(dir, suffix);
    if (port !== undefined) return port;
    if (Date.now() > deadline) {
      throw new AmfError(
        'TIMEOUT',
        `nats-server was not ready after ${timeoutMs} ms; last output:\n${server.lastLines()}`,
      );
    }
    await Promise.race([delay(POLL_MS), server.exited]);
  }
}

async function readPortsFile(dir: string, suffix: string): Promise<number | undefined> {
  const name = (await readdir(dir)).find((f) => f.endsWith(suffix));
  if (name === undefined) return undefined;
  try {
    const parsed = JSON.parse(await readFile(join(dir, name), 'utf8')) as { nats?: unknown };
    const first = Array.isArray(parsed.nats) ? parsed.nats[0] : undefined;
    if (typeof first !== 'string') return undefined;
    const port = Number(new URL(first).port);
    return Number.isInteger(port) && port > 0 ? port : undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/** Finds the binary up front so a missing install gives the install hint, not a bare ENOENT. */
export async function resolveBinary(binary: string): Promise<string> {
  const candidates =
    isAbsolute(binary) || binary.includes('/')
      ? [binary]
      : (process.env.PATH ?? '')
          .split(delimiter)
          .filter((d) => d !== '')
          .map((d) => join(d, binary));
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // try the next PATH entry
    }
  }
  throw new NatsServerMissingError(binary);
}
