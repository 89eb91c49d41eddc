/**
 * Runs the nats-server child process the coordinator uses when no external NATS is given: writes
 * its config, starts it, waits until it really accepts our users, restarts it when it dies
 * ({@link superviseNatsServer}), and stops it. The process itself (spawn, readiness, stop) is in
 * process.ts, the pid file that lets a later start end an orphaned server in orphans.ts,
 * and user reloads in userReloads.ts.
 */
import { mkdir, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { connectAs } from '../connect.js';
import { writePrivateFile, type NatsCredentials } from '../credentials.js';
import { renderNatsConfig } from './config.js';
import type { MeshUsers } from '../agentUsers.js';
import { resolveBinary, spawnServer, waitForPortsFile } from './process.js';
import { endRecordedServer, NATS_PID_FILE, removePidFile } from './orphans.js';
import { userReloader } from './userReloads.js';
import { parseViolation, type PermissionViolation } from './violations.js';
import { AmfError, toAmfError } from '../../errors.js';

export { NatsPortInUseError, NatsServerMissingError } from './errors.js';
export type { PermissionViolation } from './violations.js';

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
  /** The server's `max_payload` (default 1 MiB, config.ts); the coordinator sizes it from its HTTP caps. */
  maxPayloadBytes?: number;
  /** Receives every log line of the server. */
  logger?: (line: string) => void;
  /** The users beyond the roles (join, admitted agents); {@link NatsServerHandle.reloadUsers} changes them. */
  users?: MeshUsers;
  /** Told of every publish or subscription the server refused (so the coordinator can warn about it). */
  onViolation?: (violation: PermissionViolation) => void;
  /** Whether the legacy shared `specialist` user is configured (default true; config.ts). */
  specialistUser?: boolean;
}

const DEFAULT_READY_TIMEOUT_MS = 15_000;

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
    // The real port, not -1: a reload may not change the listener.
    const reloadUsers = userReloader(server, configPath, (users) => render(listenPort, users), reloads);
    return { url, host, port: listenPort, pid: server.pid, configPath, exited, close, reloadUsers };
  } catch (err) {
    await server.stop();
    await removePidFile(pidFile, server.pid);
    throw err;
  }
}

/** A wildcard listen address is not something to dial; loopback reaches it. */
function clientHost(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
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
    let lastError: Error = new AmfError('UNAVAILABLE', `nats-server pid ${pid} exited (${how})`);
    for (let attempt = 1; ; attempt++) {
      if (countFailure()) {
        state = 'failed';
        opts.onEvent?.({
          kind: 'gave-up',
          error: new AmfError(
            'UNAVAILABLE',
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
        lastError = err instanceof Error ? err : toAmfError(err);
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
