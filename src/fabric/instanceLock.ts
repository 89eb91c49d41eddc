/**
 * One coordinator per data dir: the JetStream store under `<data-dir>/nats` must never be opened by
 * two nats-servers at once, so `amf up` takes `<data-dir>/amf.lock` (mode 0600) before it spawns
 * one. The lock names the process holding it (pid, HTTP URL, NATS URL), which is what the refusal
 * message of a second `amf up` and `amf doctor` show. A lock whose pid is gone (a SIGKILLed
 * coordinator) is stale and taken over.
 */
import { open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { writePrivateFile } from './credentials.js';
import { AmfError } from '../errors.js';
import { pidAlive } from '../util/pidAlive.js';

export const INSTANCE_LOCK_FILE = 'amf.lock';

/** What the lock file records about the running instance. */
export interface InstanceInfo {
  pid: number;
  started_at: string;
  /** The coordinator's HTTP edge, once it listens. */
  url?: string;
  nats_url?: string;
}

/** Raised by a second coordinator on the same data dir; the message is one line. */
export class InstanceRunningError extends AmfError {
  declare readonly code: 'UNAVAILABLE';
  readonly running: InstanceInfo;

  constructor(dataDir: string, running: InstanceInfo) {
    const where = running.url ? ` at ${running.url}` : '';
    super(
      'UNAVAILABLE',
      `an AMF coordinator is already running on data dir ${dataDir} (pid ${running.pid}${where}): ` +
        `stop it, or start another with its own --data-dir (or join its NATS with --nats-url ` +
        `${running.nats_url ?? 'URL'} and another --data-dir)`,
      { pid: running.pid, ...(running.url ? { url: running.url } : {}) },
    );
    this.name = 'InstanceRunningError';
    this.running = running;
  }
}

/** A held lock: `update` adds what becomes known later (the URLs), `release` removes it. */
export interface InstanceLock {
  readonly file: string;
  update(info: Partial<Omit<InstanceInfo, 'pid'>>): Promise<void>;
  release(): Promise<void>;
}

function parseInfo(text: string): InstanceInfo | undefined {
  try {
    const v = JSON.parse(text) as Partial<InstanceInfo>;
    if (typeof v.pid !== 'number' || !Number.isInteger(v.pid) || v.pid <= 0) return undefined;
    const info: InstanceInfo = {
      pid: v.pid,
      started_at: typeof v.started_at === 'string' ? v.started_at : '',
    };
    if (typeof v.url === 'string') info.url = v.url;
    if (typeof v.nats_url === 'string') info.nats_url = v.nats_url;
    return info;
  } catch {
    return undefined;
  }
}

/** The instance holding the lock of `dataDir` when its process is alive; undefined otherwise. */
export async function readInstanceLock(dataDir: string): Promise<InstanceInfo | undefined> {
  const text = await readFile(join(dataDir, INSTANCE_LOCK_FILE), 'utf8').catch(() => undefined);
  const info = text === undefined ? undefined : parseInfo(text);
  return info && pidAlive(info.pid) ? info : undefined;
}

/**
 * Takes the lock of `dataDir` for this process, or throws {@link InstanceRunningError} naming the live
 * holder. Creation is exclusive (`wx`), so of two processes racing for a free lock exactly one wins.
 */
export async function acquireInstanceLock(dataDir: string): Promise<InstanceLock> {
  const file = join(dataDir, INSTANCE_LOCK_FILE);
  let info: InstanceInfo = { pid: process.pid, started_at: new Date().toISOString() };
  for (let attempt = 0; ; attempt++) {
    try {
      const handle = await open(file, 'wx', 0o600);
      try {
        await handle.writeFile(JSON.stringify(info) + '\n');
      } finally {
        await handle.close();
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw err;
      const text = await readFile(file, 'utf8').catch(() => undefined);
      const holder = text === undefined ? undefined : parseInfo(text);
      if (holder && pidAlive(holder.pid)) throw new InstanceRunningError(dataDir, holder);
      // Stale (its process is gone) or unreadable (a writer died mid-write): take it over.
      await unlink(file).catch(() => undefined);
    }
  }
  let released = false;
  return {
    file,
    async update(more) {
      if (released) return;
      info = { ...info, ...more };
      await writePrivateFile(file, JSON.stringify(info) + '\n');
    },
    async release() {
      if (released) return;
      released = true;
      // Only our own lock is removed: never one a successor took over.
      const current = parseInfo((await readFile(file, 'utf8').catch(() => '')) || '');
      if (current?.pid === process.pid) await unlink(file).catch(() => undefined);
    },
  };
}
