/**
 * Whether the JetStream store still holds what it held: a corrupt block makes nats-server drop the
 * messages in and after it when it rebuilds a stream, and it says little (2.12 logs a warning, and
 * stream info's `state.lost` carries the lost sequences and bytes only in some cases; a damaged last
 * block simply shrinks the stream, so its last sequence goes back). The coordinator looks for both
 * at start and while running, for every AMF stream and bucket:
 *
 * - **the server's count**: `state.lost` (sequences and bytes) in stream info;
 * - **a sequence that went back**: a stream's last sequence only ever grows (purges and retention
 *   keep it), so a stream with the same creation time and a lower last sequence than last seen lost
 *   the difference. What was last seen is kept in `<data dir>/store-marks.json` (written after each
 *   look and at close), so a loss between two runs is found at the next start.
 *
 * Each loss is logged as an error once, kept for `/health` (`nats.store`) and `amf doctor` for the
 * life of this coordinator, and, for AMF_EVENTS and AMF_RESULTS, names the tasks that could be
 * affected where that is knowable: the tasks of the task-state bucket that lived while the lost
 * messages were written (between the surviving messages around them).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JetStreamManager, StreamInfo } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { writePrivateFile } from '../fabric/credentials.js';
import { EVENTS_STREAM, RESULTS_STREAM } from '../fabric/jetstream.js';
import type { LogFn } from '../log.js';
import type { StoreHealth } from './natsServerLog.js';
import { AmfError } from '../errors.js';

/** How often the streams are looked at while running. */
export const INTEGRITY_CHECK_INTERVAL_MS = 5_000;
/** The file, in the data dir, with each stream's last sequence as last seen. */
export const STORE_MARKS_FILE = 'store-marks.json';
/** At most this many task ids are kept per loss (the count says how many in all). */
const MAX_TASKS_KEPT = 1_000;
/** At most this many of them are named in the log line and `detail`. */
const MAX_TASKS_NAMED = 20;
/**
 * A task's state times are the coordinator's clock when it decided; its events' store times are the
 * server's, a little later: the window is widened so that a task that ended just before a lost
 * message was stored is still named.
 */
const WINDOW_SLACK_MS = 5_000;
/** At most this many task-state entries are read to find the affected tasks. */
const MAX_TASKS_READ = 5_000;
/** Streams and buckets of the mesh (KV buckets are streams named `KV_<bucket>`). */
const OURS = /^(AMF_|KV_amf_)/;
const MAX_MARKS_FILE_BYTES = 1024 * 1024;
/** How long close() waits for its last look. */
const CLOSE_WAIT_MS = 3_000;

/** One loss of stored messages, as `/health` and `amf doctor` show it. */
export interface StoreLoss {
  stream: string;
  /** How many messages were lost. */
  msgs: number;
  /** Bytes lost: the server's count, else how much the stream shrank by (approximate). */
  bytes?: number;
  /** The lost sequences, first and last. */
  first_seq: number;
  last_seq: number;
  /** `server`: stream info's `state.lost`; `sequence`: the stream's last sequence went back. */
  found_by: 'server' | 'sequence';
  /** When this coordinator found it (ISO). */
  found_at: string;
  /** AMF_EVENTS and AMF_RESULTS: tasks that could be affected (up to 1,000 kept). */
  tasks?: string[];
  /** How many tasks could be affected in all. */
  tasks_total?: number;
}

/** What a stream held when last seen. */
interface StreamMark {
  created: string;
  last_seq: number;
  last_ts: string;
  bytes: number;
}

export interface StoreIntegrityOptions {
  jsm: JetStreamManager;
  /** The task-state bucket (amf_tasks), read to name the tasks a loss could affect. */
  tasks: KV;
  /** Where store-marks.json is kept. */
  dataDir: string;
  log: LogFn;
  now?: () => number;
}

export class StoreIntegrity {
  private marks = new Map<string, StreamMark>();
  private readonly found = new Map<string, StoreLoss>();
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private closed = false;
  private marksLoaded = false;
  private readonly now: () => number;

  constructor(private readonly options: StoreIntegrityOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The losses found so far, oldest first. */
  losses(): StoreLoss[] {
    return [...this.found.values()];
  }

  /** Looks at every stream now (at most one look at a time); errors are logged, never thrown. */
  check(): Promise<void> {
    this.checking ??= this.look()
      .catch((err: unknown) =>
        this.options.log('warn', 'could not check the JetStream store for lost messages', {
          error: err instanceof Error ? err.message : String(err),
        }),
      )
      .finally(() => {
        this.checking = undefined;
      });
    return this.checking;
  }

  /** Looks again every {@link INTEGRITY_CHECK_INTERVAL_MS} until close(). */
  start(): this {
    this.timer = setInterval(() => void this.check(), INTEGRITY_CHECK_INTERVAL_MS);
    this.timer.unref();
    return this;
  }

  /** Stops looking; one last look writes what the streams hold now, for the next start to compare. */
  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.timer);
    // Bounded: with NATS gone, every JetStream request would wait out its own timeout first.
    const last = (async () => {
      await this.checking;
      await this.check();
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([last, new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
    this.closed = true;
  }

  private async look(): Promise<void> {
    if (this.closed) return;
    if (!this.marksLoaded) {
      this.marks = await readMarks(join(this.options.dataDir, STORE_MARKS_FILE), this.options.log);
      this.marksLoaded = true;
    }
    const next = new Map<string, StreamMark>();
    for await (const info of this.options.jsm.streams.list()) {
      const name = info.config.name;
      if (!OURS.test(name)) continue;
      const mark: StreamMark = {
        created: info.created,
        last_seq: info.state.last_seq,
        last_ts: info.state.last_ts,
        bytes: info.state.bytes,
      };
      next.set(name, mark);
      const loss = this.lossOf(info, this.marks.get(name));
      if (loss) await this.report(loss);
    }
    // A stream no longer listed keeps its mark (it may be back at the next look).
    for (const [name, mark] of this.marks) if (!next.has(name)) next.set(name, mark);
    const changed = !sameMarks(this.marks, next);
    this.marks = next;
    if (changed)
      await writePrivateFile(
        join(this.options.dataDir, STORE_MARKS_FILE),
        `${JSON.stringify({ version: 1, streams: Object.fromEntries(next) }, null, 2)}\n`,
      );
  }

  /** The loss this stream shows now, if any (the server's count first: it is exact). */
  private lossOf(info: StreamInfo, mark: StreamMark | undefined): StoreLoss | undefined {
    const stream = info.config.name;
    const foundAt = new Date(this.now()).toISOString();
    const lost = info.state.lost;
    const seqs = (lost?.msgs ?? []).filter((s) => Number.isSafeInteger(s) && s > 0);
    if (lost && (seqs.length > 0 || lost.bytes > 0)) {
      const sorted = [...seqs].sort((a, b) => a - b);
      return {
        stream,
        msgs: seqs.length,
        bytes: lost.bytes,
        first_seq: sorted[0] ?? 0,
        last_seq: sorted.at(-1) ?? 0,
        found_by: 'server',
        found_at: foundAt,
      };
    }
    // Sequences only grow while the stream is the same one (same creation time).
    if (!mark || mark.created !== info.created || info.state.last_seq >= mark.last_seq) return undefined;
    return {
      stream,
      msgs: mark.last_seq - info.state.last_seq,
      ...(mark.bytes > info.state.bytes ? { bytes: mark.bytes - info.state.bytes } : {}),
      first_seq: info.state.last_seq + 1,
      last_seq: mark.last_seq,
      found_by: 'sequence',
      found_at: foundAt,
    };
  }

  /** Keeps, names the affected tasks of, and logs a loss not seen before. */
  private async report(loss: StoreLoss): Promise<void> {
    const key = `${loss.stream}:${loss.first_seq}-${loss.last_seq}:${loss.found_by}`;
    if (this.found.has(key)) return;
    // The same range already reported by the other means is the same loss.
    for (const known of this.found.values())
      if (known.stream === loss.stream && known.first_seq === loss.first_seq) return;
    if (loss.stream === EVENTS_STREAM || loss.stream === RESULTS_STREAM) {
      const affected = await this.affectedTasks(loss).catch(() => undefined);
      if (affected) {
        loss.tasks = affected.slice(0, MAX_TASKS_KEPT);
        loss.tasks_total = affected.length;
      }
    }
    this.found.set(key, loss);
    this.options.log('error', describeLoss(loss), {
      store_loss: { ...loss, ...(loss.tasks ? { tasks: loss.tasks.slice(0, MAX_TASKS_NAMED) } : {}) },
    });
  }

  /**
   * The tasks that lived while the lost messages were written: created before the first message
   * after the loss, and not ended before the last message before it. Unbounded on a side whose
   * neighbour message is gone too (or, after the stream's end, up to when it was last seen).
   */
  private async affectedTasks(loss: StoreLoss): Promise<string[]> {
    const { jsm, tasks } = this.options;
    const timeOf = async (seq: number): Promise<number | undefined> => {
      if (seq < 1) return undefined;
      try {
        const msg = await jsm.streams.getMessage(loss.stream, { seq });
        return msg?.time.getTime();
      } catch {
        return undefined;
      }
    };
    const from = (await timeOf(loss.first_seq - 1)) ?? -Infinity;
    const markTs = this.marks.get(loss.stream)?.last_ts;
    const to =
      (await timeOf(loss.last_seq + 1)) ??
      (loss.found_by === 'sequence' && markTs ? Date.parse(markTs) : this.now());
    const ids: string[] = [];
    let read = 0;
    for await (const key of await tasks.keys()) {
      if (++read > MAX_TASKS_READ) break;
      const entry = await tasks.get(key).catch(() => null);
      if (!entry || entry.operation !== 'PUT') continue;
      let snap: { task_id?: unknown; created_at?: unknown; ended_at?: unknown };
      try {
        snap = entry.json();
      } catch {
        continue;
      }
      if (typeof snap.task_id !== 'string' || typeof snap.created_at !== 'string') continue;
      const created = Date.parse(snap.created_at);
      const ended = typeof snap.ended_at === 'string' ? Date.parse(snap.ended_at) : Infinity;
      if (created <= to + WINDOW_SLACK_MS && ended >= from - WINDOW_SLACK_MS) ids.push(snap.task_id);
    }
    return ids.sort();
  }
}

/** Lost bytes are often a few KiB: formatBytes (fabric/natsServer/storeBudget.ts) would say 0 MiB. */
function lostBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** One sentence for the log and `amf doctor`. */
export function describeLoss(loss: StoreLoss): string {
  const range = loss.first_seq === loss.last_seq ? `${loss.first_seq}` : `${loss.first_seq}–${loss.last_seq}`;
  const bytes =
    loss.bytes !== undefined
      ? `, ${loss.found_by === 'sequence' ? 'about ' : ''}${lostBytes(loss.bytes)}`
      : '';
  const how =
    loss.found_by === 'server'
      ? 'nats-server counts them lost'
      : 'its last sequence went back since last seen';
  let tasks = '';
  if (loss.tasks_total !== undefined)
    tasks =
      loss.tasks_total === 0
        ? '; no known task could be affected'
        : `; ${loss.tasks_total} task(s) could be affected: ${(loss.tasks ?? []).slice(0, MAX_TASKS_NAMED).join(', ')}${loss.tasks_total > MAX_TASKS_NAMED ? ', …' : ''}`;
  return `the JetStream store lost ${loss.msgs} message(s) of ${loss.stream} (sequence ${range}${bytes}; ${how})${tasks}`;
}

/**
 * `/health`'s store: the server's own word (natsServerLog.ts) with the losses found here; any loss
 * makes it `corrupt`, and the detail says what was lost.
 */
export function storeHealthWithLosses(
  fromLog: StoreHealth | undefined,
  losses: StoreLoss[] | undefined,
): StoreHealth | undefined {
  if (!losses || losses.length === 0) return fromLog;
  const base = fromLog ?? { state: 'ok' as const };
  return {
    ...base,
    // A full store is the more urgent trouble (new tasks are refused); the losses stay listed.
    state: base.state === 'full' ? 'full' : 'corrupt',
    detail: losses.map(describeLoss).join('; '),
    ...(base.detail && base.state !== 'ok' ? { server_detail: base.detail } : {}),
    losses,
  };
}

async function readMarks(file: string, log: LogFn): Promise<Map<string, StreamMark>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return new Map();
  }
  const marks = new Map<string, StreamMark>();
  try {
    if (text.length > MAX_MARKS_FILE_BYTES)
      throw new AmfError('CONFIG_INVALID', `larger than ${MAX_MARKS_FILE_BYTES} bytes`);
    const parsed = JSON.parse(text) as { streams?: unknown };
    const streams = parsed.streams;
    if (typeof streams !== 'object' || streams === null)
      throw new AmfError('CONFIG_INVALID', 'no "streams" object');
    for (const [name, value] of Object.entries(streams as Record<string, unknown>)) {
      const m = value as Partial<StreamMark> | null;
      if (
        OURS.test(name) &&
        typeof m?.created === 'string' &&
        Number.isSafeInteger(m.last_seq) &&
        typeof m.last_ts === 'string' &&
        Number.isSafeInteger(m.bytes)
      )
        marks.set(name, m as StreamMark);
    }
  } catch (err) {
    // Unreadable marks only mean nothing to compare with: the next look writes them anew.
    log('warn', `ignoring ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  return marks;
}

function sameMarks(a: Map<string, StreamMark>, b: Map<string, StreamMark>): boolean {
  if (a.size !== b.size) return false;
  for (const [name, m] of a) {
    const o = b.get(name);
    if (!o || o.created !== m.created || o.last_seq !== m.last_seq || o.bytes !== m.bytes) return false;
  }
  return true;
}
