/**
 * Supervises the nats-server child process the coordinator runs when no external NATS is given:
 * writes its config, starts it, waits until it really accepts our users, restarts it when it dies
 * ({@link superviseNatsServer}), and stops it (never leaving it behind when this process exits).
 * Its pid is recorded in `<data-dir>/nats-server.pid`, so a server orphaned by a SIGKILLed
 * coordinator is ended by the next start instead of holding the port and the JetStream directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdir, readdir, readFile, unlink } from 'node:fs/promises';
import { basename, delimiter, isAbsolute, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { connectAs } from './connect.js';
import { describePortOwner } from './portOwner.js';
import { writePrivateFile, type NatsCredentials } from './credentials.js';
import { renderNatsConfig } from './natsConfig.js';
import type { MeshUsers } from './agentUsers.js';
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

/** The host:port a nats-server's bind failure names. */
function portInUseAddress(output: string): string | undefined {
  const addr = /Listening for client connections on ([^\s]+)|listen tcp ([^\s]+:\d+)/.exec(output);
  return addr?.[1] ?? addr?.[2];
}

/** Names the holder of the address a bind failure names (best effort, see portOwner.ts). */
async function portOwnerOf(output: string): Promise<string | undefined> {
  const where = /^(.*):(\d+)$/.exec(portInUseAddress(output) ?? '');
  if (!where) return undefined;
  const host = where[1]!.replace(/^\[|\]$/g, '');
  return describePortOwner(host === '0.0.0.0' || host === '' ? '127.0.0.1' : host, Number(where[2]));
}

/**
 * Raised when the spawned server cannot bind its port: one line naming the flags to use, instead of
 * the server's log (which is kept as `details.output` for whoever wants it).
 */
export class NatsPortInUseError extends AmfError {
  declare readonly code: 'UNAVAILABLE';

  constructor(output: string, owner?: string) {
    const where = portInUseAddress(output) ?? 'its port';
    super(
      'UNAVAILABLE',
      `nats-server cannot listen on ${where}: the address is already in use by ${owner ?? 'another program (another amf up?)'}. ` +
        `Choose another port with --nats-port (0 = any free port), or share that NATS with --nats-url`,
      { output },
    );
    this.name = 'NatsPortInUseError';
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
  /** Settles when the process has ended, with how it ended (`code 0`, `signal SIGKILL`). */
  exited: Promise<string>;
  /** Stops the server (SIGTERM, SIGKILL if it lingers) and waits for it to exit; safe to repeat. */
  close(): Promise<void>;
  /**
   * Rewrites the config with these users (the join user, the admitted agents' nkey users) and makes
   * the server reload it (SIGHUP); resolves once the server says it reloaded. Clients whose user is
   * gone are disconnected by the server.
   */
  reloadUsers(users: MeshUsers): Promise<void>;
}

/** A subject a client was refused by the server's permissions (read from its log). */
export interface PermissionViolation {
  kind: 'publish' | 'subscribe';
  /** The user name, or the nkey of an nkey user. */
  user: string;
  subject: string;
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
  /** The users beyond the roles (join, admitted agents); {@link NatsServerHandle.reloadUsers} changes them. */
  users?: MeshUsers;
  /** Told of every publish or subscription the server refused (so the coordinator can warn about it). */
  onViolation?: (violation: PermissionViolation) => void;
  /** Whether the legacy shared `specialist` user is configured (default true; natsConfig.ts). */
  specialistUser?: boolean;
}

const DEFAULT_READY_TIMEOUT_MS = 15_000;
const STOP_GRACE_MS = 5_000;
const POLL_MS = 20;
const KEPT_LOG_LINES = 20;
/** Where the pid of the running server is recorded, relative to the data dir. */
export const NATS_PID_FILE = 'nats-server.pid';

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
  const render = (listenPort: number, users: MeshUsers | undefined): string =>
    renderNatsConfig({
      host,
      port: listenPort,
      storeDir: natsDir,
      credentials: opts.credentials,
      ...(opts.maxPayloadBytes !== undefined ? { maxPayloadBytes: opts.maxPayloadBytes } : {}),
      ...(users ? { users } : {}),
      ...(opts.specialistUser !== undefined ? { specialistUser: opts.specialistUser } : {}),
    });
  const config = render(port === 0 ? -1 : port, opts.users);
  // A server a SIGKILLed coordinator left behind holds the port and the store: end it first.
  await endRecordedServer(opts.dataDir, configPath, opts.logger);
  await writePrivateFile(configPath, config);

  const reloads = new Set<(line: string) => void>();
  const server = await spawnServer(
    requested,
    binary,
    ['-c', configPath, '--ports_file_dir', natsDir],
    (line) => {
      opts.logger?.(line);
      for (const waiter of reloads) waiter(line);
      if (opts.onViolation) {
        const violation = parseViolation(line);
        if (violation) opts.onViolation(violation);
      }
    },
  );
  const pidFile = join(opts.dataDir, NATS_PID_FILE);
  try {
    await writePrivateFile(pidFile, `${server.pid}\n`);
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
      await removePidFile(pidFile, server.pid);
    };
    const exited = server.exited.then(() => server.exitInfo() ?? 'unknown');
    // Reloads run one after another, and changes that arrive while one runs fold into the next: each
    // writes the whole user set, so only the newest set matters. A burst of admissions and revocations
    // (a test suite, a mesh starting) then costs two reloads instead of one each, and a server busy
    // reloading does not keep new connections waiting behind a queue of them.
    let reloading: Promise<void> = Promise.resolve();
    let queued: { users: MeshUsers; done: Promise<void> } | undefined;
    const reloadOnce = async (users: MeshUsers): Promise<void> => {
      if (server.exitInfo() !== undefined) return;
      // The real port, not -1: a reload may not change the listener.
      await writePrivateFile(configPath, render(listenPort, users));
      const done = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => finish(new Error('nats-server did not confirm the reload in 5 s')),
          5_000,
        );
        const waiter = (line: string): void => {
          if (/Reloaded server configuration/.test(line)) finish();
          else if (/config reload failed|Failed to reload/i.test(line)) finish(new Error(line));
        };
        const finish = (err?: Error): void => {
          clearTimeout(timer);
          reloads.delete(waiter);
          if (err) reject(err);
          else resolve();
        };
        reloads.add(waiter);
      });
      process.kill(server.pid, 'SIGHUP');
      await done;
    };
    const reloadUsers = (users: MeshUsers): Promise<void> => {
      if (queued) {
        queued.users = users;
        return queued.done;
      }
      const entry: { users: MeshUsers; done: Promise<void> } = { users, done: Promise.resolve() };
      entry.done = reloading.then(() => {
        queued = undefined;
        return reloadOnce(entry.users);
      });
      queued = entry;
      reloading = entry.done.catch(() => undefined);
      return entry.done;
    };
    return { url, host, port: listenPort, pid: server.pid, configPath, exited, close, reloadUsers };
  } catch (err) {
    await server.stop();
    await removePidFile(pidFile, server.pid);
    throw err;
  }
}

/** Reads a `Publish Violation` / `Subscription Violation` line of nats-server's log. */
export function parseViolation(line: string): PermissionViolation | undefined {
  const m = /(Publish|Subscription) Violation - (?:User|Nkey) "([^"]{1,128})", Subject "([^"]{1,512})"/.exec(
    line,
  );
  if (!m) return undefined;
  return { kind: m[1] === 'Publish' ? 'publish' : 'subscribe', user: m[2]!, subject: m[3]! };
}

/** Removes the pid file only while it still names `pid` (a restarted server may have rewritten it). */
async function removePidFile(file: string, pid: number): Promise<void> {
  const recorded = await readFile(file, 'utf8').catch(() => '');
  if (Number(recorded.trim()) === pid) await unlink(file).catch(() => undefined);
}

/** True when `pid` is a live nats-server started with `configPath` (Linux /proc; false elsewhere). */
async function isOurServer(pid: number, configPath: string): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return false;
  const argv = cmdline.split('\0');
  return basename(argv[0] ?? '').includes('nats-server') && argv.includes(configPath);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else, so it is not ours to end anyway.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Ends the nats-server recorded in `<dataDir>/nats-server.pid` when it is still running with our
 * config (a pid reused by an unrelated process is left alone): SIGTERM, then SIGKILL after a grace.
 */
export async function endRecordedServer(
  dataDir: string,
  configPath: string,
  logger?: (line: string) => void,
): Promise<void> {
  const file = join(dataDir, NATS_PID_FILE);
  const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return;
  if (!(await isOurServer(pid, configPath))) {
    await unlink(file).catch(() => undefined);
    return;
  }
  logger?.(`ending orphaned nats-server pid ${pid} left by an earlier coordinator`);
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (alive(pid) && (await isOurServer(pid, configPath)) && Date.now() < deadline) await delay(POLL_MS);
  if (alive(pid) && (await isOurServer(pid, configPath))) {
    process.kill(pid, 'SIGKILL');
    const killDeadline = Date.now() + STOP_GRACE_MS;
    while ((await isOurServer(pid, configPath)) && Date.now() < killDeadline) await delay(POLL_MS);
  }
  await unlink(file).catch(() => undefined);
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
async function waitForPortsFile(server: SpawnedServer, dir: string, timeoutMs: number): Promise<number> {
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

/** What the supervisor reports: the server died, came back, or is given up on. */
export type NatsSupervisorEvent =
  | { kind: 'exited'; how: string; pid: number }
  | { kind: 'restarted'; pid: number; restarts: number }
  | { kind: 'restart-failed'; error: Error; attempt: number }
  | { kind: 'gave-up'; error: Error };

/** Options of {@link superviseNatsServer}: those of {@link startNatsServer} plus the restart policy. */
export interface SuperviseNatsServerOptions extends StartNatsServerOptions {
  /** First restart delay; doubles on each failed attempt (default 200 ms). */
  initialBackoffMs?: number;
  /** Ceiling of the delay (default 5 s). */
  maxBackoffMs?: number;
  /** Give up after this many deaths or failed restarts within `failureWindowMs` (default 5). */
  maxFailures?: number;
  /** Default 60 s. */
  failureWindowMs?: number;
  onEvent?: (event: NatsSupervisorEvent) => void;
}

/** A supervised server: `pid` follows restarts; `state` says whether clients can reach it now. */
export interface SupervisedNatsServer extends NatsServerHandle {
  readonly state: 'running' | 'restarting' | 'failed';
  /** Restarts that succeeded since start. */
  readonly restarts: number;
}

/**
 * Starts nats-server and keeps it running: when it dies it is started again on the same port (so
 * clients reconnecting to the URL they know find it) after a back-off of `initialBackoffMs` doubling
 * to `maxBackoffMs`. More than `maxFailures` deaths or failed restarts within `failureWindowMs` mean
 * something is wrong that restarting will not fix: the supervisor reports `gave-up` and stops trying.
 */
export async function superviseNatsServer(opts: SuperviseNatsServerOptions): Promise<SupervisedNatsServer> {
  // The latest users: a restarted server starts with them, not with the ones of the first start.
  let users = opts.users;
  const first = await startNatsServer(opts);
  const initialBackoff = opts.initialBackoffMs ?? 200;
  const maxBackoff = opts.maxBackoffMs ?? 5_000;
  const maxFailures = opts.maxFailures ?? 5;
  const windowMs = opts.failureWindowMs ?? 60_000;
  let current: NatsServerHandle = first;
  let state: SupervisedNatsServer['state'] = 'running';
  let restarts = 0;
  let stopping = false;
  const failures: number[] = [];
  // Aborts a pending back-off wait when close() is called.
  const stopSignal = new AbortController();
  let restarting: Promise<void> = Promise.resolve();

  const countFailure = (): boolean => {
    const now = Date.now();
    failures.push(now);
    while (failures.length > 0 && (failures[0] ?? now) < now - windowMs) failures.shift();
    return failures.length > maxFailures;
  };

  const restart = async (how: string, pid: number): Promise<void> => {
    opts.onEvent?.({ kind: 'exited', how, pid });
    state = 'restarting';
    let backoff = initialBackoff;
    let lastError: Error = new Error(`nats-server pid ${pid} exited (${how})`);
    for (let attempt = 1; ; attempt++) {
      if (countFailure()) {
        state = 'failed';
        opts.onEvent?.({
          kind: 'gave-up',
          error: new Error(
            `nats-server failed ${failures.length} times within ${Math.round(windowMs / 1000)} s ` +
              `(last: ${firstLineOf(lastError.message)}); not restarting it again`,
          ),
        });
        return;
      }
      const waited = await delay(backoff, true, { signal: stopSignal.signal }).catch(() => false);
      if (!waited || stopping) return;
      try {
        const next = await startNatsServer({ ...opts, port: first.port, ...(users ? { users } : {}) });
        if (stopping) {
          await next.close();
          return;
        }
        current = next;
        restarts++;
        state = 'running';
        opts.onEvent?.({ kind: 'restarted', pid: next.pid, restarts });
        watch(next);
        return;
      } catch (err) {
        lastError = err instanceof Error ? err : new Error(String(err));
        opts.onEvent?.({ kind: 'restart-failed', error: lastError, attempt });
        backoff = Math.min(backoff * 2, maxBackoff);
      }
    }
  };

  const watch = (handle: NatsServerHandle): void => {
    void handle.exited.then((how) => {
      if (stopping || handle !== current) return;
      restarting = restart(how, handle.pid);
    });
  };
  watch(first);

  let closing: Promise<void> | undefined;
  return {
    url: first.url,
    host: first.host,
    port: first.port,
    configPath: first.configPath,
    get pid() {
      return current.pid;
    },
    get exited() {
      return current.exited;
    },
    get state() {
      return state;
    },
    get restarts() {
      return restarts;
    },
    reloadUsers(next: MeshUsers) {
      users = next;
      // While restarting, the new server is started with these users anyway.
      return state === 'running' ? current.reloadUsers(next) : Promise.resolve();
    },
    close() {
      closing ??= (async () => {
        stopping = true;
        stopSignal.abort();
        await restarting;
        await current.close();
      })();
      return closing;
    },
  };
}

function firstLineOf(text: string): string {
  return text.split('\n')[0] ?? text;
}
