/**
 * `GET /tasks?state=&tag=&agent=&trace=&limit=`: the tasks of the mesh as the coordinators stored
 * them in the shared `amf_tasks` KV bucket (every coordinator writes the tasks it owns), newest
 * change first, filtered. Read-only: it reads the bucket's stream, never the lifecycle's logic; a
 * task this coordinator tracks in memory is shown in its fresher in-memory state.
 *
 * Bounded whatever is asked: at most `limit` tasks are returned and at most TASK_LIST_MAX_SCAN
 * entries are read, newest first, in batches of parallel reads.
 */
import type { JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import { AmfError } from '../../errors.js';
import { isCapabilityTag } from '../../events/subjects.js';
import { TASKS_BUCKET } from '../../fabric/jetstream.js';
import type { TaskSnapshot } from '../../coordinator/sharedState.js';

export const TASK_LIST_DEFAULT_LIMIT = 100;
export const TASK_LIST_MAX_LIMIT = 500;
/** Bucket entries read per query at most (one per task: the bucket keeps only the last state). */
export const TASK_LIST_MAX_SCAN = 5000;
const READ_BATCH = 100;
const MAX_ID_CHARS = 512;
export const TASK_LIST_STATES = ['announced', 'claimed', 'blocked', 'completed', 'failed', 'expired'];
/** The stream behind a KV bucket. */
const TASKS_STREAM = `KV_${TASKS_BUCKET}`;

export interface TaskListQuery {
  state?: string;
  tag?: string;
  agent?: string;
  /** A trace id, or a task id (or the start of either). */
  trace?: string;
  limit: number;
}

export interface TaskListPage {
  tasks: TaskSnapshot[];
  /** Bucket entries read to answer. */
  scanned: number;
  /** True when the scan bound stopped the search before the oldest entry. */
  truncated: boolean;
}

function text(url: URL, name: string): string | undefined {
  const value = url.searchParams.get(name);
  if (value === null || value === '') return undefined;
  if (value.length > MAX_ID_CHARS)
    throw new AmfError('INVALID_REQUEST', `${name} must be at most ${MAX_ID_CHARS} characters`);
  return value;
}

/** Parses and bounds the query of `GET /tasks`; every error names the parameter. */
export function parseTaskListQuery(url: URL): TaskListQuery {
  const state = text(url, 'state');
  if (state !== undefined && !TASK_LIST_STATES.includes(state))
    throw new AmfError('INVALID_REQUEST', `state must be one of ${TASK_LIST_STATES.join(', ')}`);
  const tag = text(url, 'tag');
  if (tag !== undefined && !isCapabilityTag(tag))
    throw new AmfError('INVALID_REQUEST', `tag must be a capability tag ([a-z0-9-]+)`);
  const rawLimit = url.searchParams.get('limit');
  const limit = rawLimit === null ? TASK_LIST_DEFAULT_LIMIT : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > TASK_LIST_MAX_LIMIT)
    throw new AmfError('INVALID_REQUEST', `limit must be an integer from 1 to ${TASK_LIST_MAX_LIMIT}`);
  const agent = text(url, 'agent');
  const trace = text(url, 'trace');
  return {
    limit,
    ...(state !== undefined ? { state } : {}),
    ...(tag !== undefined ? { tag } : {}),
    ...(agent !== undefined ? { agent } : {}),
    ...(trace !== undefined ? { trace } : {}),
  };
}

function decode(msg: StoredMsg | null): TaskSnapshot | undefined {
  // A deleted or purged key is an empty entry; anything unreadable is skipped.
  if (!msg || msg.data.length === 0) return undefined;
  try {
    const snap = msg.json<TaskSnapshot>();
    return typeof snap?.task_id === 'string' && typeof snap.state === 'string' ? snap : undefined;
  } catch {
    return undefined;
  }
}

function matches(task: TaskSnapshot, q: TaskListQuery): boolean {
  if (q.state !== undefined && task.state !== q.state) return false;
  if (q.tag !== undefined && task.tag !== q.tag) return false;
  if (q.agent !== undefined && task.claimed_by !== q.agent) return false;
  if (q.trace !== undefined && !task.trace_id.startsWith(q.trace) && !task.task_id.startsWith(q.trace))
    return false;
  return true;
}

/** The newest stored tasks matching `query`; `fresher(id)` gives a task's in-memory state, if any. */
export async function listTasks(
  jsm: JetStreamManager,
  query: TaskListQuery,
  fresher: (taskId: string) => TaskSnapshot | undefined = () => undefined,
  maxScan = TASK_LIST_MAX_SCAN,
): Promise<TaskListPage> {
  const info = await jsm.streams.info(TASKS_STREAM);
  const { first_seq: first, last_seq: last, messages } = info.state;
  const tasks: TaskSnapshot[] = [];
  const seen = new Set<string>();
  let scanned = 0;
  let seq = last;
  while (messages > 0 && seq >= first && seq > 0 && tasks.length < query.limit && scanned < maxScan) {
    const batch: number[] = [];
    while (batch.length < READ_BATCH && seq >= first && seq > 0 && scanned + batch.length < maxScan)
      batch.push(seq--);
    scanned += batch.length;
    const msgs = await Promise.all(
      batch.map((s) => jsm.streams.getMessage(TASKS_STREAM, { seq: s }).catch(() => null)),
    );
    for (const msg of msgs) {
      const stored = decode(msg);
      if (!stored || seen.has(stored.task_id) || tasks.length >= query.limit) continue;
      seen.add(stored.task_id);
      const task = fresher(stored.task_id) ?? stored;
      if (matches(task, query)) tasks.push(task);
    }
  }
  return { tasks, scanned, truncated: seq >= first && seq > 0 && messages > 0 };
}
