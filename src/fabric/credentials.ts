/**
 * Per-role NATS credentials. The NATS ACLs are AMF's security boundary (notes/amf.md §8), so each
 * role connects as its own user; the passwords live in `<data-dir>/credentials.json` (mode 0600), the
 * coordinator's file. Workers read only `<data-dir>/join.json` (the join credential, which can do
 * nothing but advertise) and connect afterwards with their own nkey (docs/security.md).
 */
import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AmfError } from '../errors.js';

/** The four NATS users of an AMF mesh; `amfagentrole` in events is advisory, these are enforced. */
export type NatsRole = 'coordinator' | 'specialist' | 'watcher' | 'connector';

/** Username and password of one NATS user. */
export interface RoleCredential {
  user: string;
  password: string;
}

/** Credentials of every role, as stored in `credentials.json`. */
export type NatsCredentials = Record<NatsRole, RoleCredential>;

/** Every role, in a stable order (config rendering and validation iterate over it). */
export const NATS_ROLES: readonly NatsRole[] = Object.freeze([
  'coordinator',
  'specialist',
  'watcher',
  'connector',
]);

/** Fixed NATS usernames; only the passwords are secret. */
export const ROLE_USERS: Readonly<Record<NatsRole, string>> = Object.freeze({
  coordinator: 'amf-coordinator',
  specialist: 'amf-specialist',
  watcher: 'amf-watcher',
  connector: 'amf-connector',
});

/** Environment variables that override a role's password (DESIGN.md §3). */
export const ROLE_PASSWORD_ENV: Readonly<Record<NatsRole, string>> = Object.freeze({
  coordinator: 'AMF_COORD_PASS',
  specialist: 'AMF_SPECIALIST_PASS',
  watcher: 'AMF_WATCHER_PASS',
  connector: 'AMF_CONNECTOR_PASS',
});

/** Name of the credentials file inside the data dir (shared by the coordinator and local workers). */
export const CREDENTIALS_FILE = 'credentials.json';
const MAX_PASSWORD_LENGTH = 1024;

/**
 * Returns the mesh credentials, creating them on first start. The file is the single record of
 * what the NATS server accepts, so when an `AMF_*_PASS` variable overrides a stored password the
 * file is rewritten too: workers that later call {@link readCredentials} on the same data dir must
 * see the password the server was actually configured with. Creation is race-free (a hard link
 * publishes the file only if no other process did first), so two processes starting together end
 * up with one set of passwords.
 */
export async function loadOrCreateCredentials(
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<NatsCredentials> {
  const file = join(dataDir, CREDENTIALS_FILE);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const existing = await readIfPresent(file);
  if (existing === undefined) {
    const fresh = applyEnv(generateCredentials(), env);
    if (await publishIfAbsent(file, serialize(fresh))) return fresh;
    // Another process won the race: use its file, which is now the truth.
    return loadOrCreateCredentials(dataDir, env);
  }
  await tightenMode(file);
  const overridden = applyEnv(existing, env);
  if (!sameCredentials(existing, overridden)) await writePrivateFile(file, serialize(overridden));
  return overridden;
}

/**
 * Reads the credentials another process (the coordinator) created, without ever generating
 * them: a worker that invented its own passwords would silently fail to authenticate.
 */
export async function readCredentials(dataDir: string): Promise<NatsCredentials> {
  const file = join(dataDir, CREDENTIALS_FILE);
  const found = await readIfPresent(file);
  if (found === undefined) {
    throw new AmfError(
      'CONFIG_INVALID',
      `NATS credentials file ${file} does not exist: start the coordinator (amf up) with this data dir first, ` +
        `or set AMF_DATA_DIR to the coordinator's data dir`,
    );
  }
  return found;
}

/** One NATS user kept in a file of its own (`join.json`, `system.json`), overridable by environment. */
interface SingleUserFile {
  file: string;
  user: string;
  passwordEnv: string;
  /** What the credential is, for error messages. */
  what: string;
}

/** The one file of the data dir a worker reads: the join credential only (see agentUsers.ts). */
export const JOIN_FILE = 'join.json';
/** Overrides the join password (an agent on another machine is given it this way). */
export const JOIN_PASSWORD_ENV = 'AMF_JOIN_PASS';
/** The join door's NATS user; it may only publish advertisements (agentUsers.ts). */
export const JOIN_USER = 'amf-join';
const JOIN: SingleUserFile = {
  file: JOIN_FILE,
  user: JOIN_USER,
  passwordEnv: JOIN_PASSWORD_ENV,
  what: 'join credential',
};

/**
 * The system-account user of an external NATS or cluster (`system.json`, written by
 * scripts/cluster.sh): the coordinators log in with it only to close the connections of revoked
 * agents (`$SYS.REQ.SERVER.<id>.KICK`, revocationKicks.ts). Never given to a worker.
 */
export const SYSTEM_FILE = 'system.json';
export const SYSTEM_PASSWORD_ENV = 'AMF_SYSTEM_PASS';
export const SYSTEM_USER = 'amf-system';
const SYSTEM: SingleUserFile = {
  file: SYSTEM_FILE,
  user: SYSTEM_USER,
  passwordEnv: SYSTEM_PASSWORD_ENV,
  what: 'NATS system-account credential',
};

/**
 * Returns the join credential, creating `<data-dir>/join.json` (0600) on first start. It holds
 * nothing but the join user, which may only publish advertisements: a worker that reads it learns
 * no other role's secret (the coordinator's own passwords stay in `credentials.json`).
 */
export function loadOrCreateJoinCredential(
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RoleCredential> {
  return loadOrCreateSingleUser(JOIN, dataDir, env);
}

/** Returns the system-account credential, creating `<data-dir>/system.json` (0600) when absent. */
export function loadOrCreateSystemCredential(
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RoleCredential> {
  return loadOrCreateSingleUser(SYSTEM, dataDir, env);
}

/**
 * The system-account credential when this mesh has one (`AMF_SYSTEM_PASS`, else
 * `<data-dir>/system.json`), else undefined: an external NATS need not give AMF a system user.
 */
export async function readSystemCredentialIfPresent(
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RoleCredential | undefined> {
  const fromEnv = env[SYSTEM_PASSWORD_ENV];
  if (fromEnv) return { user: SYSTEM_USER, password: fromEnv };
  return readSingleUserIfPresent(SYSTEM, join(dataDir, SYSTEM_FILE));
}

async function loadOrCreateSingleUser(
  spec: SingleUserFile,
  dataDir: string,
  env: NodeJS.ProcessEnv,
): Promise<RoleCredential> {
  const file = join(dataDir, spec.file);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const fromEnv = env[spec.passwordEnv];
  if (fromEnv !== undefined && fromEnv !== '') {
    const problem = passwordProblem(fromEnv);
    if (problem !== undefined)
      throw new AmfError('CONFIG_INVALID', `environment variable ${spec.passwordEnv} ${problem}`);
  }
  const existing = await readSingleUserIfPresent(spec, file);
  if (existing === undefined) {
    const fresh = { user: spec.user, password: fromEnv || randomBytes(32).toString('base64url') };
    if (await publishIfAbsent(file, `${JSON.stringify(fresh, null, 2)}\n`)) return fresh;
    return loadOrCreateSingleUser(spec, dataDir, env);
  }
  await tightenMode(file);
  if (fromEnv && fromEnv !== existing.password) {
    const updated = { user: spec.user, password: fromEnv };
    await writePrivateFile(file, `${JSON.stringify(updated, null, 2)}\n`);
    return updated;
  }
  return existing;
}

/**
 * The join credential a worker uses: `AMF_JOIN_PASS`, else `<data-dir>/join.json` written by the
 * coordinator (never generated here: a worker inventing one would never be let in).
 */
export async function readJoinCredential(
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RoleCredential> {
  const fromEnv = env[JOIN_PASSWORD_ENV];
  if (fromEnv) return { user: JOIN_USER, password: fromEnv };
  const file = join(dataDir, JOIN_FILE);
  const found = await readSingleUserIfPresent(JOIN, file);
  if (found === undefined)
    throw new AmfError(
      'CONFIG_INVALID',
      `join credential ${file} does not exist: start the coordinator (amf up) with this data dir first, ` +
        `or set ${JOIN_PASSWORD_ENV} to the password in the coordinator's ${JOIN_FILE}`,
    );
  return found;
}

async function readSingleUserIfPresent(
  spec: SingleUserFile,
  file: string,
): Promise<RoleCredential | undefined> {
  const text = await readTextIfPresent(file);
  if (text === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new AmfError(
      'CONFIG_INVALID',
      `malformed ${spec.what} ${file}: not valid JSON (${(err as Error).message})`,
    );
  }
  if (!isObject(parsed) || parsed.user !== spec.user || passwordProblem(parsed.password) !== undefined)
    throw new AmfError(
      'CONFIG_INVALID',
      `malformed ${spec.what} ${file}: expected {"user":"${spec.user}","password":"..."}`,
    );
  return { user: spec.user, password: parsed.password as string };
}

/**
 * Writes `data` to `path` readable by the owner only, atomically (temp file + rename), so a crash
 * never leaves a half-written secret and no other user can read it even for an instant. The
 * explicit chmod makes the mode 0600 whatever the process umask is.
 */
export async function writePrivateFile(path: string, data: string): Promise<void> {
  const tmp = await writeTemp(path, data);
  try {
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/** Checks an untrusted parsed JSON value and returns it typed, or says what is wrong. */
function parseCredentials(value: unknown, source: string): NatsCredentials {
  const fail = (what: string): never => {
    throw new AmfError('CONFIG_INVALID', `malformed NATS credentials file ${source}: ${what}`);
  };
  if (!isObject(value)) return fail(`expected a JSON object with keys ${NATS_ROLES.join(', ')}`);
  const result: Partial<NatsCredentials> = {};
  for (const role of NATS_ROLES) {
    const entry = value[role];
    if (!isObject(entry)) return fail(`"${role}" must be an object {"user","password"}`);
    if (entry.user !== ROLE_USERS[role]) {
      return fail(`"${role}.user" must be "${ROLE_USERS[role]}", got ${JSON.stringify(entry.user)}`);
    }
    const problem = passwordProblem(entry.password);
    if (problem !== undefined) return fail(`"${role}.password" ${problem}`);
    result[role] = { user: ROLE_USERS[role], password: entry.password as string };
  }
  return result as NatsCredentials;
}

function generateCredentials(): NatsCredentials {
  const make = (role: NatsRole): RoleCredential => ({
    user: ROLE_USERS[role],
    password: randomBytes(32).toString('base64url'),
  });
  return {
    coordinator: make('coordinator'),
    specialist: make('specialist'),
    watcher: make('watcher'),
    connector: make('connector'),
  };
}

function applyEnv(creds: NatsCredentials, env: NodeJS.ProcessEnv): NatsCredentials {
  const out = { ...creds };
  for (const role of NATS_ROLES) {
    const name = ROLE_PASSWORD_ENV[role];
    const value = env[name];
    if (value === undefined || value === '') continue;
    const problem = passwordProblem(value);
    if (problem !== undefined)
      throw new AmfError('CONFIG_INVALID', `environment variable ${name} ${problem}`);
    out[role] = { user: ROLE_USERS[role], password: value };
  }
  return out;
}

/** Refuses passwords nats-server could not use as given, before they reach the config file. */
function passwordProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0) return 'must be a non-empty string';
  if (value.length > MAX_PASSWORD_LENGTH) return `must be at most ${MAX_PASSWORD_LENGTH} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) return 'must not contain control characters';
  // nats-server treats a password starting like a bcrypt hash as one and would never match it.
  if (value.startsWith('$2')) return 'must not start with "$2" (nats-server would read it as a bcrypt hash)';
  return undefined;
}

function sameCredentials(a: NatsCredentials, b: NatsCredentials): boolean {
  return NATS_ROLES.every((r) => a[r].user === b[r].user && a[r].password === b[r].password);
}

/** The file's text, or undefined when it does not exist (any other read error is thrown). */
async function readTextIfPresent(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function serialize(creds: NatsCredentials): string {
  return `${JSON.stringify(creds, null, 2)}\n`;
}

async function readIfPresent(file: string): Promise<NatsCredentials | undefined> {
  const text = await readTextIfPresent(file);
  if (text === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new AmfError(
      'CONFIG_INVALID',
      `malformed NATS credentials file ${file}: not valid JSON (${(err as Error).message})`,
    );
  }
  return parseCredentials(parsed, file);
}

/** A secret readable by group or others is a leak waiting to happen; narrow it quietly. */
async function tightenMode(file: string): Promise<void> {
  const { mode } = await stat(file);
  if ((mode & 0o077) !== 0) await chmod(file, 0o600);
}

async function writeTemp(path: string, data: string): Promise<string> {
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(tmp, data, { mode: 0o600, flag: 'wx' });
  await chmod(tmp, 0o600);
  return tmp;
}

/**
 * Publishes the file only if it does not exist yet: link() fails with EEXIST instead of replacing,
 * and readers never see a partly written file. Filesystems without hard links fall back to an
 * exclusive create, which keeps the "only if absent" guarantee.
 */
async function publishIfAbsent(path: string, data: string): Promise<boolean> {
  const tmp = await writeTemp(path, data);
  try {
    await link(tmp, path);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw err;
    return createExclusive(path, data);
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

async function createExclusive(path: string, data: string): Promise<boolean> {
  try {
    await writeFile(path, data, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  await chmod(path, 0o600);
  return true;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
