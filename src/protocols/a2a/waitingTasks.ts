/**
 * A2A tasks of the coordinator that wait for their client's next message (input-required), kept in
 * a NATS KV bucket so that a restarted coordinator (same NATS) takes them over: the client may be a
 * person who answers hours later (`a2a.input_ttl_seconds`), and a restart in between must not lose
 * the task. One entry per waiting task, written when it turns input-required and deleted when a
 * follow-up moves it on or it ends; so the bucket holds only tasks that wait right now, at most as
 * many as the A2A task store holds running tasks. Coordinators sharing one NATS share the bucket;
 * each takes over only the entries of its own data dir (WaitingTask.owner).
 */
import type { KV } from '@nats-io/kv';
import type { AmfEventOf } from '../../events/cloudEvent.js';
import { kvKey } from '../../fabric/jetstream.js';
import { jsonBytes } from '../../util/jsonBytes.js';

/** What a new coordinator needs to answer for, and continue, one waiting task. */
export interface WaitingTask {
  /** The A2A task as its client last saw it (`Task.toJSON`). */
  task: unknown;
  /** The mesh task behind it, and the announcement that started it (its TaskRecord is rebuilt from it). */
  meshTaskId: string;
  announce: AmfEventOf<'amf.task.announce'>;
  /** The agent whose handler waits for the message, and its attempt. */
  claimedBy: string;
  attempt: number;
  /** How the task was routed (the answer's metadata names it). */
  tag: string;
  routedVia: string;
  /** When the wait for the client's next message ends (ms since the epoch): the input TTL. */
  inputDeadline: number;
  /**
   * The coordinator that keeps it, as its host and data dir: only a coordinator of the same data
   * dir takes it over, and the data dir's instance lock means the one that wrote it has stopped.
   */
  owner: string;
}

/** A stored entry as it must look; anything else is skipped (and deleted) on restore. */
export function isWaitingTask(value: unknown): value is WaitingTask {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  const announce = v.announce as { type?: unknown; data?: { payload?: { task_id?: unknown } } } | undefined;
  return (
    typeof v.task === 'object' &&
    v.task !== null &&
    typeof v.meshTaskId === 'string' &&
    announce?.type === 'amf.task.announce' &&
    announce.data?.payload?.task_id === v.meshTaskId &&
    typeof v.claimedBy === 'string' &&
    Number.isInteger(v.attempt) &&
    typeof v.tag === 'string' &&
    typeof v.routedVia === 'string' &&
    typeof v.inputDeadline === 'number' &&
    Number.isFinite(v.inputDeadline) &&
    typeof v.owner === 'string'
  );
}

/** The bucket of waiting tasks, keyed by A2A task id. */
export class WaitingTasks {
  /** `kv`: the shared bucket, made with the other stores and sized from the store budget (jetstream.ts). */
  constructor(private readonly kv: KV) {}

  async put(a2aTaskId: string, waiting: WaitingTask): Promise<void> {
    await this.kv.put(kvKey(a2aTaskId), jsonBytes(waiting));
  }

  async remove(a2aTaskId: string): Promise<void> {
    await this.kv.delete(kvKey(a2aTaskId));
  }

  /** Every entry, by A2A task id; an entry that does not parse is deleted and reported through `onBad`. */
  async all(onBad: (key: string, why: string) => void): Promise<Map<string, WaitingTask>> {
    const out = new Map<string, WaitingTask>();
    const keys: string[] = [];
    for await (const key of await this.kv.keys()) keys.push(key);
    for (const key of keys) {
      const entry = await this.kv.get(key);
      if (!entry || entry.operation !== 'PUT') continue;
      const id = Buffer.from(key, 'base64url').toString('utf8');
      let value: unknown;
      try {
        value = entry.json();
      } catch (err) {
        value = err;
      }
      if (isWaitingTask(value)) out.set(id, value);
      else {
        onBad(id, 'not a waiting task entry');
        await this.kv.delete(key);
      }
    }
    return out;
  }
}
