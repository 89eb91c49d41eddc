/**
 * The operator key: the bearer secret of the coordinator's operator routes (`/events`, `/agents`,
 * `/tasks`, ...). When none is configured, the coordinator generates one into
 * `<data-dir>/operator.key` (mode 0600, directory 0700), and the same Unix user's CLI and console read
 * it from there, as Jupyter hands its token to its owner: zero-config for the owner, nothing for
 * anyone else on the machine.
 */
import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AmfError } from '../errors.js';

/** The key file's name inside the data dir. */
export const OPERATOR_KEY_FILE = 'operator.key';

/** Where the operator key of the mesh whose data dir is `dataDir` is kept. */
export function operatorKeyFile(dataDir: string): string {
  return join(dataDir, OPERATOR_KEY_FILE);
}

/** Errors of `link` on file systems that have no hard links. */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'ENOSYS', 'EOPNOTSUPP']);

/** 32 random bytes, base64url: unguessable, and safe in a header, a URL fragment or a shell. */
function newKey(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The operator key in `dataDir`, or undefined when none was generated yet. A file readable by others
 * is narrowed to 0600 first: whoever reads it is the operator. An empty file counts as absent.
 */
export async function readOperatorKey(dataDir: string): Promise<string | undefined> {
  const file = operatorKeyFile(dataDir);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const { mode } = await stat(file);
  if ((mode & 0o077) !== 0) await chmod(file, 0o600);
  const key = text.trim();
  return key === '' ? undefined : key;
}

/**
 * The operator key in `dataDir`, created on first use. The key is written whole to a file of this
 * process's own (`wx`), then linked into place: the link is atomic and fails if the file exists, so
 * racing starters agree on the first key, and none ever reads a half-written one.
 */
export async function loadOrCreateOperatorKey(dataDir: string): Promise<string> {
  const existing = await readOperatorKey(dataDir);
  if (existing !== undefined) return existing;
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const file = operatorKeyFile(dataDir);
  const draft = `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
  const key = newKey();
  await writeFile(draft, `${key}\n`, { mode: 0o600, flag: 'wx' });
  try {
    // Exactly 0600 whatever the umask took away (a key its owner cannot read is no key).
    await chmod(draft, 0o600);
    try {
      await link(draft, file);
    } catch (err) {
      // A file system without hard links: exclusive create, as agentKey.ts does.
      if (!NO_LINKS.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
      await writeFile(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const theirs = await readOperatorKey(dataDir);
    if (theirs === undefined)
      throw new AmfError('CONFIG_INVALID', `${file} is empty: delete it and start again`, undefined, {
        cause: err,
      });
    return theirs;
  } finally {
    await unlink(draft).catch(() => undefined);
  }
  return key;
}
