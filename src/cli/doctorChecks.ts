/**
 * The checks of `amf doctor`: node, the Ed25519 implementation, malloc trimming, nats-server (binary, URL, port), OPA,
 * the coordinator's port and URL, the data directory and the credential file's mode. Each says how to fix what it finds.
 */
import { constants as fsConstants } from 'node:fs';
import { access, mkdtemp, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { InstanceInfo } from '../fabric/instanceLock.js';
import { ed25519 } from '../identity/ed25519.js';
import { loadMallocTrim } from '../util/memoryTrimmer.js';
import { fail, pass, warn, type DoctorCheck } from './doctorOutcome.js';
import {
  firstLine,
  getJson,
  isHealth,
  natsHostPort,
  nearestExisting,
  portState,
  runVersion,
  tcpReachable,
  versionOf,
} from './doctorProbes.js';
import { compareVersions, parseServerVersion, slowStoreReason } from '../fabric/natsServer/version.js';

const MIN_NODE_MAJOR = 20;

// KV buckets (the registry, task state) need JetStream KV, which nats-server has had since 2.6.
const MIN_NATS_SERVER = [2, 6, 0] as const;
const TCP_TIMEOUT_MS = 2000;
const HEALTH_TIMEOUT_MS = 1000;
const OPA_INSTALL = 'go install github.com/open-policy-agent/opa@latest';
const NATS_INSTALL =
  'install nats-server (https://docs.nats.io/running-a-nats-service/introduction/installation, ' +
  'e.g. go install github.com/nats-io/nats-server/v2@latest), or point --nats-url / nats.url at a running server';

/** Node.js is new enough. */
export function checkNode(): DoctorCheck {
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

/** Which Ed25519 signs and checks every task event: libsodium is about twice as fast (ed25519.ts). */
export function checkEd25519(): DoctorCheck {
  return ed25519.backend === 'libsodium'
    ? pass('ed25519', 'libsodium (sodium-native) signs and checks events')
    : warn(
        'ed25519',
        'node:crypto signs and checks events: sodium-native did not load here (or AMF_ED25519=node), about half as fast',
        'reinstall the npm packages on this platform (npm ci), or unset AMF_ED25519',
      );
}

/** Whether `amf up` and the workers give malloc's free pages back after full GCs (memoryTrimmer.ts). */
export function checkMemoryTrimming(env: NodeJS.ProcessEnv = process.env): DoctorCheck {
  const loaded = loadMallocTrim(env);
  if (!('unavailable' in loaded))
    return pass(
      'memory',
      "glibc's malloc_trim runs after full garbage collections (AMF_MALLOC_TRIM=0 turns it off)",
    );
  if (env.AMF_MALLOC_TRIM === '0' || process.platform !== 'linux')
    return pass('memory', `no malloc trimming: ${loaded.unavailable}`);
  return warn(
    'memory',
    `no malloc trimming: ${loaded.unavailable}; the coordinator keeps 35–50 MB more after a burst of tasks`,
    'reinstall the npm packages on this platform (npm ci) so that koffi loads; without glibc (musl) there is nothing to trim',
  );
}

/** The nats-server binary runs and is new enough for JetStream KV. */
export async function checkNatsBinary(binary: string): Promise<DoctorCheck> {
  const run = await runVersion(binary, ['--version']);
  if (!run.ok) {
    const detail = run.notFound ? `${binary} not found on PATH` : `${binary} --version failed: ${run.error}`;
    return fail('nats-server', detail, NATS_INSTALL);
  }
  const version = parseServerVersion(run.output);
  if (!version)
    return warn('nats-server', `${binary} found, but its version is unreadable: ${firstLine(run.output)}`);
  const text = `${binary} ${version.join('.')}`;
  if (compareVersions(version, MIN_NATS_SERVER) < 0)
    return fail(
      'nats-server',
      `${text} is too old (JetStream KV needs ${MIN_NATS_SERVER.join('.')}+)`,
      NATS_INSTALL,
    );
  const slow = slowStoreReason(version);
  return slow
    ? warn(
        'nats-server',
        `${text} ${slow}`,
        'bash scripts/install-nats.sh, then AMF_NATS_SERVER_BIN=<the path it prints>',
      )
    : pass('nats-server', text);
}

/** An external NATS (`--nats-url`) accepts TCP connections. */
export async function checkNatsUrl(url: string): Promise<DoctorCheck> {
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
export function coordinatorHealthUrl(c: { host: string; port: number; url: string }): string {
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

/** The port AMF would give nats-server is free, or held by the mesh already running here. */
export async function checkNatsPort(
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

/** The opa binary is installed (a warning only: the wasm bundle works without it). */
export async function checkOpa(): Promise<DoctorCheck> {
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

/** The configured OPA server answers its health endpoint. */
export async function checkOpaServer(opaUrl: string): Promise<DoctorCheck> {
  const health = await getJson(new URL('/health', opaUrl).toString(), TCP_TIMEOUT_MS);
  return health.ok
    ? pass('opa-server', `OPA at ${opaUrl} is healthy`)
    : fail(
        'opa-server',
        `OPA at ${opaUrl} does not answer /health: ${health.error}`,
        'start OPA with `opa run --server`, or correct --opa-url',
      );
}

/** The coordinator's port is free, or held by a coordinator already running. */
export async function checkCoordinatorPort(host: string, port: number): Promise<DoctorCheck> {
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

/** The coordinator given with `--coordinator` answers /health. */
export async function checkCoordinatorUrl(url: string): Promise<DoctorCheck> {
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

/** The data directory exists and is writable, or can be created. */
export async function checkDataDir(dir: string): Promise<DoctorCheck> {
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

/** The data dir's secrets: each, when present, must be readable by its owner only. */
const SECRET_FILES = [
  ['credentials.json', 'the NATS passwords'],
  ['join.json', 'the join password'],
  ['operator.key', 'the operator key'],
  ['coordinator.nk', "the coordinator's signing key"],
  ['callout.nkey', 'the auth callout issuer key'],
] as const;

/** The credential files, when present, are readable by their owner only. */
export async function checkCredentials(dir: string): Promise<DoctorCheck> {
  const seen: string[] = [];
  for (const [name, holds] of SECRET_FILES) {
    const file = path.join(dir, name);
    const info = await stat(file).catch((err: NodeJS.ErrnoException) => err);
    if (info instanceof Error) {
      if (info.code === 'ENOENT') continue;
      return fail('credentials', `cannot inspect ${file}: ${info.code ?? info.message}`);
    }
    if (process.platform === 'win32')
      return warn('credentials', `${file} exists; file modes are not checked on Windows`);
    const mode = info.mode & 0o777;
    const octal = mode.toString(8).padStart(4, '0');
    // Stricter than 0600 (e.g. 0400) is fine; what matters is that group and others cannot read it.
    if ((mode & 0o077) !== 0)
      return fail(
        'credentials',
        `${file} has mode ${octal}: other users can read ${holds}`,
        `chmod 600 ${file}`,
      );
    seen.push(`${name} ${octal}`);
  }
  if (seen.length === 0)
    return pass(
      'credentials',
      `${path.join(dir, 'credentials.json')} not created yet (amf up generates it with mode 0600)`,
    );
  return pass('credentials', `owner-only in ${dir}: ${seen.join(', ')}`);
}
