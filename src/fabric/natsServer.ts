/**
 * Supervises the nats-server child process the coordinator runs when no external NATS is given:
 * writes its config, starts it, waits until it really accepts our users, and stops it (never
 * leaving it behind when this process exits).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdir, readdir, readFile, unlink } from 'node:fs/promises';
import { basename, delimiter, isAbsolute, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { connectAs } from './connect.js';
import { writePrivateFile, type NatsCredentials } from './credentials.js';
import { renderNatsConfig } from './natsConfig.js';
import { AmfError } from '../errors.js';

/** Raised when the nats-server binary cannot be found; the message says how to install it. */
export class NatsServerMissingError extends AmfError {
  declare readonly code: 'NATS_SERVER_MISSING';
  readonly binary: string;

  constructor(binary: string, options?: ErrorOptions) {
    super(
      'NATS_SERVER_MISSING',
      `nats-server binary "${binary}" was not found. Install it with "apt-get install -y nats-server" (Debian/Ubuntu) ` +
        `or "go install github.com/nats-io/nats-server/v2@latest", or point AMF_NATS_SERVER_BIN at it, ` +
        `or use an existing NATS with --nats-url`,
      undefined,
      options,
    );
    this.name = 'NatsServerMissingError';
    this.binary = binary;
  }
}

/** A running nats-server. */
export interface NatsServerHandle {
  /** Client URL, e.g. `nats://127.0.0.1:41234`. */
  url: string;
  host: string;
  port: number;
  pid: number;
  configPath: string;
  /** Stops the server (SIGTERM, SIGKILL if it lingers) and waits for it to exit; safe to repeat. */
  close(): Promise<void>;
}

/** Options of {@link startNatsServer}. */
export interface StartNatsServerOptions {
  dataDir: string;
  credentials: NatsCredentials;
  /** Listen address; default 127.0.0.1 (local-first: nothing listens on the LAN unless asked). */
  host?: string;
  /** 0 (default) lets the kernel choose a free port, which parallel tests rely on. */
  port?: number;
  /** Binary name or path; default `$AMF_NATS_SERVER_BIN`, else `nats-server` from PATH. */
  binary?: string;
  readyTimeoutMs?: number;
  /** The server's `max_payload` (default 1 MiB, natsConfig.ts); the coordinator sizes it from its HTTP caps. */
  maxPayloadBytes?: number;
  /** Receives every log line of the server. */
  logger?: (line: string) => void;
}

const DEFAULT_READY_TIMEOUT_MS = 15_000;
const STOP_GRACE_MS = 5_000;
const POLL_MS = 20;
const KEPT_LOG_LINES = 20;

/** Children still running; killed synchronously if this process exits without closing them. */
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

function killLiveChildren(): void {
  for (const child of liveChildren) child.kill('SIGKILL');
}

/**
 * Starts nats-server with AMF's generated config (per-role users and ACLs, JetStream under
 * `<dataDir>/nats/jetstream`) and resolves once a coordinator connection succeeds, so callers can
 * use it at once. Port 0 is handed to the server as -1 and the real port is read from the ports
 * file the server writes once it listens, which avoids the probe-then-bind race of picking a port
 * ourselves.
 */
export async function startNatsServer(opts: StartNatsServerOptions): Promise<NatsServerHandle> {
  const requested = opts.binary ?? process.env.AMF_NATS_SERVER_BIN ?? 'nats-server';
  const binary = await resolveBinary(requested);
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 0;
  const natsDir = join(opts.dataDir, 'nats');
  await mkdir(natsDir, { recursive: true, mode: 0o700 });
  const configPath = join(natsDir, 'nats-server.conf');
  const config = renderNatsConfig({
    host,
    port: port === 0 ? -1 : port,
    storeDir: natsDir,
    credentials: opts.credentials,
    ...(opts.maxPayloadBytes !== undefined ? { maxPayloadBytes: opts.maxPayloadBytes } : {}),
  });
  await writePrivateFile(configPath, config);

  const server = await spawnServer(
    requested,
    binary,
    ['-c', configPath, '--ports_file_dir', natsDir],
    opts.logger,
  );
  try {
    const listenPort = await waitForPortsFile(
      server,
      natsDir,
      opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS,
    );
    const url = `nats://${clientHost(host)}:${listenPort}`;
    const probe = await connectAs(url, opts.credentials.coordinator, 'amf-nats-readiness', {
      maxReconnectAttempts: 0,
    });
    await probe.close();
    // nats-server removes its ports file on a clean shutdown, not after SIGKILL.
    const close = async (): Promise<void> => {
      await server.stop();
      await unlink(join(natsDir, `${basename(binary)}_${server.pid}.ports`)).catch(() => undefined);
    };
    return { url, host, port: listenPort, pid: server.pid, configPath, close };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

interface SpawnedServer {
  pid: number;
  /** Set once the child has exited; readiness polling checks it. */
  exitInfo: () => string | undefined;
  exited: Promise<void>;
  lastLines: () => string;
  stop: () => Promise<void>;
}

async function spawnServer(
  requested: string,
  binary: string,
  args: string[],
  logger: ((line: string) => void) | undefined,
): Promise<SpawnedServer> {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
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
async function waitForPortsFile(server: SpawnedServer, dir: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  const suffix = `_${server.pid}.ports`;
  for (;;) {
    const exit = server.exitInfo();
    if (exit !== undefined) {
      throw new Error(
        `nats-server exited (${exit}) before it was ready; last output:\n${server.lastLines()}`,
      );
    }
    const port = await readPortsFile(dir, suffix);
    if (port !== undefined) return port;
    if (Date.now() > deadline) {
      throw new Error(`nats-server was not ready after ${timeoutMs} ms; last output:\n${server.lastLines()}`);
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

/** A wildcard listen address is not something to dial; loopback reaches it. */
function clientHost(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** Finds the binary up front so a missing install gives the install hint, not a bare ENOENT. */
async function resolveBinary(binary: string): Promise<string> {
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
