/**
 * `amf doctor`: checks the machine and the configuration before `amf up`, and says how to fix
 * each problem. Checks are independent and run concurrently; every one that touches something
 * outside the process (a program, a socket, an HTTP server) has a timeout, so doctor always ends.
 */
import { execFile } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import path from 'node:path';
import type { AmfConfig } from '../config/config.js';
import { readInstanceLock, type InstanceInfo } from '../fabric/instanceLock.js';

/** How bad a check's outcome is: `fail` makes the whole report not ok, `warn` does not. */
export type DoctorLevel = 'ok' | 'warn' | 'fail';

/** One check's outcome. `ok` is true only for level `ok`; `fix` says what to do, when there is something. */
export interface DoctorCheck {
  name: string;
  ok: boolean;
  level: DoctorLevel;
  detail: string;
  fix?: string;
}

/** The whole report: `ok` when no check failed (warnings allowed). */
export interface DoctorResult {
  ok: boolean;
  checks: DoctorCheck[];
}

/** What to check: the loaded configuration, and optionally a coordinator URL to probe (`--coordinator`). */
export interface DoctorOptions {
  config: AmfConfig;
  coordinatorUrl?: string;
}

const MIN_NODE_MAJOR = 20;
// KV buckets (the registry, task state) need JetStream KV, which nats-server has had since 2.6.
const MIN_NATS_SERVER = [2, 6, 0] as const;
const EXEC_TIMEOUT_MS = 2000;
const TCP_TIMEOUT_MS = 2000;
const HEALTH_TIMEOUT_MS = 1000;
const OPA_INSTALL = 'go install github.com/open-policy-agent/opa@latest';
const NATS_INSTALL =
  'install nats-server (https://docs.nats.io/running-a-nats-service/introduction/installation, ' +
  'e.g. go install github.com/nats-io/nats-server/v2@latest), or point --nats-url / nats.url at a running server';

/** Runs every check; never throws for a failed check (an unexpected error becomes a `fail`). */
export async function runDoctor(opts: DoctorOptions): Promise<DoctorResult> {
  const { config } = opts;
  // A mesh already running on this data dir owns its nats-server port: that is not a problem.
  const running = await readInstanceLock(config.dataDir).catch(() => undefined);
  const checks: Array<Promise<DoctorCheck | DoctorCheck[]>> = [
    Promise.resolve(checkNode()),
    config.nats.url ? checkNatsUrl(config.nats.url) : checkNatsBinary(config.nats.serverBinary),
    config.nats.url
      ? Promise.resolve([])
      : checkNatsPort(config.nats.port, running, coordinatorHealthUrl(config.coordinator)),
    checkOpa(),
    config.policy.opaUrl ? checkOpaServer(config.policy.opaUrl) : Promise.resolve([]),
    checkCoordinatorPort(config.coordinator.host, config.coordinator.port),
    opts.coordinatorUrl ? checkCoordinatorUrl(opts.coordinatorUrl) : Promise.resolve([]),
    checkDataDir(config.dataDir),
    checkCredentials(config.dataDir),
  ];
  const names = [
    'node',
    'nats',
    'nats-port',
    'opa',
    'opa-server',
    'coordinator-port',
    'coordinator',
    'data-dir',
    'credentials',
  ];
  const settled = await Promise.allSettled(checks);
  const results = settled.flatMap((s, i): DoctorCheck[] =>
    s.status === 'fulfilled'
      ? ([] as DoctorCheck[]).concat(s.value)
      : [fail(names[i] ?? 'check', `check crashed: ${(s.reason as Error)?.message ?? String(s.reason)}`)],
  );
  return { ok: results.every((c) => c.level !== 'fail'), checks: results };
}

/** One line per check: a ✓ / ! / ✗ mark, the name, the detail, and the fix when there is one. */
export function formatDoctorReport(result: DoctorResult): string {
  const mark: Record<DoctorLevel, string> = { ok: '✓', warn: '!', fail: '✗' };
  return result.checks
    .map((c) => `${mark[c.level]} ${c.name}: ${c.detail}${c.fix ? ` (fix: ${c.fix})` : ''}`)
    .join('\n');
}

// ---------------------------------------------------------------------------------------------
// Checks

function checkNode(): DoctorCheck {
  const version = process.versions.node;
  const major = Number(version.split('.')[0]);
  return major >= MIN_NODE_MAJOR
    ? pass('node', `Node.js ${version}`)
    : fail(
        'node',
        `Node.js ${version} is too old (AMF needs ${MIN_NODE_MAJOR} or newer)`,
        `install Node.js ${MIN_NODE_MAJOR}+`,
      );
}

async function checkNatsBinary(binary: string): Promise<DoctorCheck> {
  const run = await runVersion(binary, ['--version']);
  if (!run.ok) {
    const detail = run.notFound ? `${binary} not found on PATH` : `${binary} --version failed: ${run.error}`;
    return fail('nats-server', detail, NATS_INSTALL);
  }
  const match = /v?(\d+)\.(\d+)\.(\d+)/.exec(run.output);
  if (!match)
    return warn('nats-server', `${binary} found, but its version is unreadable: ${firstLine(run.output)}`);
  const version = [Number(match[1]), Number(match[2]), Number(match[3])];
  const tooOld = compareVersions(version, MIN_NATS_SERVER) < 0;
  const text = `${binary} ${version.join('.')}`;
  return tooOld
    ? fail(
        'nats-server',
        `${text} is too old (JetStream KV needs ${MIN_NATS_SERVER.join('.')}+)`,
        NATS_INSTALL,
      )
    : pass('nats-server', text);
}

async function checkNatsUrl(url: string): Promise<DoctorCheck> {
  // A cluster URL list is fine if any one server answers: the client fails over between them.
  const servers = url.split(',').map((s) => s.trim());
  const tried: string[] = [];
  for (const server of servers) {
    const target = natsHostPort(server);
    if (!target) {
      tried.push(`${server} (unparsable)`);
      continue;
    }
    const reached = await tcpReachable(target.host, target.port, TCP_TIMEOUT_MS);
    if (reached === true) return pass('nats', `${target.host}:${target.port} accepts connections`);
    tried.push(`${target.host}:${target.port} (${reached})`);
  }
  return fail(
    'nats',
    `cannot reach NATS at ${tried.join(', ')}`,
    'start that NATS server, or drop --nats-url so AMF spawns its own',
  );
}

/** Where the configured coordinator answers /health (a wildcard bind is probed on loopback). */
function coordinatorHealthUrl(c: { host: string; port: number; url: string }): string {
  if (c.port === 0) return new URL('/health', c.url).toString();
  const host = c.host === '0.0.0.0' || c.host === '::' ? '127.0.0.1' : c.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${c.port}/health`;
}

/**
 * True when the coordinator answering at `healthUrl` runs its nats-server on `port`: a mesh started
 * with another data dir (so no instance lock here) still owns that port, and that is not a problem.
 */
async function portOfRunningMesh(healthUrl: string, port: number): Promise<string | undefined> {
  const health = await getJson(healthUrl, HEALTH_TIMEOUT_MS);
  if (!health.ok || !isHealth(health.body)) return undefined;
  const nats = (health.body as { nats?: { url?: unknown } }).nats;
  if (typeof nats?.url !== 'string' || natsHostPort(nats.url)?.port !== port) return undefined;
  return healthUrl.replace(/\/health$/, '');
}

async function checkNatsPort(
  port: number,
  running: InstanceInfo | undefined,
  coordinatorHealth: string,
): Promise<DoctorCheck> {
  const runningPort = running?.nats_url ? natsHostPort(running.nats_url)?.port : undefined;
  // Whatever port is configured, the next `amf up` on this data dir is refused while this mesh runs.
  if (running && runningPort !== undefined) {
    const where = running.url ? ` at ${running.url}` : '';
    return pass(
      'nats-port',
      `port ${runningPort} is used by the running mesh's nats-server (coordinator pid ${running.pid}${where})`,
    );
  }
  if (port === 0) return pass('nats-port', 'port 0: nats-server will take any free port');
  const state = await portState('127.0.0.1', port);
  if (state === 'free') return pass('nats-port', `port ${port} is free for nats-server`);
  if (state === 'in-use') {
    const mesh = await portOfRunningMesh(coordinatorHealth, port);
    if (mesh)
      return pass(
        'nats-port',
        `port ${port} is used by the running mesh's nats-server (coordinator at ${mesh})`,
      );
    return fail(
      'nats-port',
      `port ${port} is already in use (another nats-server?)`,
      `choose another port with --nats-port, or use that server with --nats-url nats://127.0.0.1:${port}`,
    );
  }
  return fail(
    'nats-port',
    `cannot listen on 127.0.0.1:${port}: ${state}`,
    'choose another port with --nats-port',
  );
}

async function checkOpa(): Promise<DoctorCheck> {
  const run = await runVersion('opa', ['version']);
  if (!run.ok) {
    // Policies run in-process from the wasm bundle; the binary is only needed to rebuild it.
    const detail = run.notFound
      ? 'opa not found on PATH (only needed to rebuild the policy bundle or run an OPA server)'
      : `opa version failed: ${run.error}`;
    return warn('opa', detail, OPA_INSTALL);
  }
  const match = /Version:\s*(\S+)/.exec(run.output);
  return pass('opa', `opa ${match?.[1] ?? firstLine(run.output)}`);
}

async function checkOpaServer(opaUrl: string): Promise<DoctorCheck> {
  const health = await getJson(new URL('/health', opaUrl).toString(), TCP_TIMEOUT_MS);
  return health.ok
    ? pass('opa-server', `OPA at ${opaUrl} is healthy`)
    : fail(
        'opa-server',
        `OPA at ${opaUrl} does not answer /health: ${health.error}`,
        'start OPA with `opa run --server`, or correct --opa-url',
      );
}

async function checkCoordinatorPort(host: string, port: number): Promise<DoctorCheck> {
  if (port === 0) return pass('coordinator-port', 'port 0: the coordinator will take any free port');
  const state = await portState(host, port);
  if (state === 'free') return pass('coordinator-port', `${host}:${port} is free`);
  if (state === 'in-use') {
    // A running coordinator there is fine: doctor is often run next to one.
    const probeHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
    const url = `http://${probeHost.includes(':') ? `[${probeHost}]` : probeHost}:${port}/health`;
    const health = await getJson(url, HEALTH_TIMEOUT_MS);
    if (health.ok && isHealth(health.body)) {
      return pass(
        'coordinator-port',
        `a coordinator is already running on ${host}:${port}${versionOf(health.body)}`,
      );
    }
    return fail(
      'coordinator-port',
      `${host}:${port} is in use by something that is not an AMF coordinator`,
      'stop that program, or choose another port with --port (0 = any free port)',
    );
  }
  return fail(
    'coordinator-port',
    `cannot listen on ${host}:${port}: ${state}`,
    'check --host, or choose another port with --port',
  );
}

async function checkCoordinatorUrl(url: string): Promise<DoctorCheck> {
  let healthUrl: string;
  try {
    healthUrl = new URL('/health', url).toString();
  } catch {
    return fail('coordinator', `${url} is not a URL`, 'pass --coordinator http://HOST:PORT');
  }
  const health = await getJson(healthUrl, HEALTH_TIMEOUT_MS);
  if (health.ok && isHealth(health.body)) {
    return pass('coordinator', `coordinator at ${url} answers${versionOf(health.body)}`);
  }
  // Not a failure of this machine's setup: clients just have nothing to talk to yet.
  return warn(
    'coordinator',
    `no coordinator answers at ${url} (${health.ok ? 'unexpected /health body' : health.error})`,
    'start one with amf up',
  );
}

async function checkDataDir(dir: string): Promise<DoctorCheck> {
  const info = await stat(dir).catch((err: NodeJS.ErrnoException) => err);
  if (info instanceof Error) {
    if (info.code !== 'ENOENT')
      return fail('data-dir', `cannot inspect ${dir}: ${info.code ?? info.message}`);
    // Doctor does not create it; it only checks that `amf up` will be able to.
    const ancestor = await nearestExisting(path.dirname(dir));
    try {
      await access(ancestor, fsConstants.W_OK | fsConstants.X_OK);
      return pass('data-dir', `${dir} does not exist yet and can be created`);
    } catch {
      return fail(
        'data-dir',
        `${dir} does not exist and ${ancestor} is not writable`,
        `mkdir -p ${dir}, or choose another --data-dir`,
      );
    }
  }
  if (!info.isDirectory())
    return fail('data-dir', `${dir} exists but is not a directory`, 'choose another --data-dir');
  // Write for real: access() says yes as root and on read-only file systems.
  try {
    const probe = await mkdtemp(path.join(dir, '.doctor-'));
    await rm(probe, { recursive: true, force: true });
    return pass('data-dir', `${dir} is writable`);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return fail(
      'data-dir',
      `${dir} is not writable (${code})`,
      `chmod u+w ${dir}, or choose another --data-dir`,
    );
  }
}

async function checkCredentials(dir: string): Promise<DoctorCheck> {
  const file = path.join(dir, 'credentials.json');
  const info = await stat(file).catch((err: NodeJS.ErrnoException) => err);
  if (info instanceof Error) {
    return info.code === 'ENOENT'
      ? pass('credentials', `${file} not created yet (amf up generates it with mode 0600)`)
      : fail('credentials', `cannot inspect ${file}: ${info.code ?? info.message}`);
  }
  if (process.platform === 'win32')
    return warn('credentials', `${file} exists; file modes are not checked on Windows`);
  const mode = info.mode & 0o777;
  const octal = mode.toString(8).padStart(4, '0');
  // Stricter than 0600 (e.g. 0400) is fine; what matters is that group and others cannot read it.
  if ((mode & 0o077) !== 0) {
    return fail(
      'credentials',
      `${file} has mode ${octal}: other users can read the NATS passwords`,
      `chmod 600 ${file}`,
    );
  }
  return pass('credentials', `${file} has mode ${octal}`);
}

// ---------------------------------------------------------------------------------------------
// Probes

type VersionRun = { ok: true; output: string } | { ok: false; notFound: boolean; error: string };

function runVersion(binary: string, args: string[]): Promise<VersionRun> {
  return new Promise((resolve) => {
    execFile(
      binary,
      args,
      { timeout: EXEC_TIMEOUT_MS, maxBuffer: 64 * 1024, windowsHide: true },
      (err, stdout, stderr) => {
        if (err) {
          const e = err as NodeJS.ErrnoException & { killed?: boolean };
          if (e.code === 'ENOENT') resolve({ ok: false, notFound: true, error: 'not found' });
          else if (e.killed)
            resolve({ ok: false, notFound: false, error: `timed out after ${EXEC_TIMEOUT_MS} ms` });
          else resolve({ ok: false, notFound: false, error: firstLine(String(stderr || e.message)) });
          return;
        }
        resolve({ ok: true, output: `${stdout}${stderr}`.trim() });
      },
    );
  });
}

/** `free`, `in-use`, or the error that prevented listening (e.g. the host is not a local address). */
function portState(host: string, port: number): Promise<'free' | 'in-use' | string> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', (err: NodeJS.ErrnoException) => {
      resolve(err.code === 'EADDRINUSE' ? 'in-use' : (err.code ?? err.message));
    });
    server.listen({ host, port, exclusive: true }, () => {
      server.close(() => resolve('free'));
    });
  });
}

/** True when a TCP connection opens within the timeout, else the reason it did not. */
function tcpReachable(host: string, port: number, timeoutMs: number): Promise<true | string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (result: true | string): void => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done(`no answer within ${timeoutMs} ms`));
    socket.once('connect', () => done(true));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
  });
}

type JsonGet = { ok: true; body: unknown } | { ok: false; error: string };

async function getJson(url: string, timeoutMs: number): Promise<JsonGet> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    if (!res.ok) return { ok: false, error: `HTTP ${res.status}` };
    try {
      return { ok: true, body: JSON.parse(text) as unknown };
    } catch {
      return { ok: true, body: text };
    }
  } catch (err) {
    const e = err as Error & {
      cause?: { code?: string; message?: string; errors?: Array<{ code?: string }> };
    };
    if (e.name === 'TimeoutError') return { ok: false, error: `no answer within ${timeoutMs} ms` };
    // fetch wraps the socket error ("fetch failed"); the useful part is the cause's code.
    const cause = e.cause;
    return { ok: false, error: cause?.code ?? cause?.errors?.[0]?.code ?? cause?.message ?? e.message };
  }
}

function isHealth(body: unknown): body is { status: unknown; version?: unknown; amf_version?: unknown } {
  return typeof body === 'object' && body !== null && 'status' in body;
}

function versionOf(body: { version?: unknown; amf_version?: unknown }): string {
  // amf_version is the release; `version` is the wire profile (af-mcp-0.1) on current coordinators.
  if (typeof body.amf_version === 'string') return ` (amf ${body.amf_version})`;
  return typeof body.version === 'string' ? ` (version ${body.version})` : '';
}

function natsHostPort(server: string): { host: string; port: number } | undefined {
  const withScheme = /^[a-z]+:\/\//i.test(server) ? server : `nats://${server}`;
  try {
    const u = new URL(withScheme);
    const host = u.hostname.replace(/^\[|\]$/g, '');
    if (!host) return undefined;
    const defaultPort = u.protocol === 'ws:' ? 80 : u.protocol === 'wss:' ? 443 : 4222;
    return { host, port: u.port ? Number(u.port) : defaultPort };
  } catch {
    return undefined;
  }
}

async function nearestExisting(dir: string): Promise<string> {
  let current = dir;
  for (;;) {
    try {
      await stat(current);
      return current;
    } catch {
      const parent = path.dirname(current);
      if (parent === current) return current;
      current = parent;
    }
  }
}

function compareVersions(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function firstLine(text: string): string {
  return text.split('\n')[0]?.trim() ?? '';
}

function pass(name: string, detail: string): DoctorCheck {
  return { name, ok: true, level: 'ok', detail };
}

function warn(name: string, detail: string, fix?: string): DoctorCheck {
  return fix ? { name, ok: false, level: 'warn', detail, fix } : { name, ok: false, level: 'warn', detail };
}

function fail(name: string, detail: string, fix?: string): DoctorCheck {
  return fix ? { name, ok: false, level: 'fail', detail, fix } : { name, ok: false, level: 'fail', detail };
}
