/**
 * Reads back what a JetStream stream kept: the newest messages matching a subject filter (and
 * optionally one task id), oldest first. The console replays `GET /events/history` on load before it
 * opens the live `/events` stream, so a page opened after a task still shows it.
 *
 * Bounded whatever is asked: at most `maxResults` messages are returned and at most `maxScan`
 * sequences are read per query, newest first, in batches of parallel reads.
 */
import type { JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import { AmfError } from '../errors.js';
import { isValidSubjectPattern, subjectMatches } from '../events/subjects.js';

export const HISTORY_DEFAULT_LIMIT = 200;
export const HISTORY_MAX_LIMIT = 1000;
/** Sequences read per query at most: a rare subject in a long stream is found only this far back. */
export const HISTORY_MAX_SCAN = 5000;
const READ_BATCH = 100;
const MAX_TASK_ID_CHARS = 200;

export interface HistoryQuery {
  /** NATS subject pattern within amf.> (default amf.>). */
  subject: string;
  limit: number;
  /** Only events whose `amftaskid` (or payload task id) is this. */
  taskId?: string;
}

export interface HistoryEntry {
  seq: number;
  subject: string;
  time: string;
  event: unknown;
}

export interface HistoryPage {
  stream: string;
  events: HistoryEntry[];
  /** Sequences read to answer (≤ HISTORY_MAX_SCAN). */
  scanned: number;
  /** True when the scan bound stopped the search before the stream's first message. */
  truncated: boolean;
}

/** Parses and bounds `?subject=&limit=&task=` of a history request. */
export function parseHistoryQuery(url: URL): HistoryQuery {
  const subject = url.searchParams.get('subject') || 'amf.>';
  if (!isValidSubjectPattern(subject))
    throw new AmfError(
      'INVALID_REQUEST',
      `invalid subject filter "${subject.slice(0, 100)}": expected a NATS subject pattern such as amf.task.>`,
    );
  if (!subject.startsWith('amf.') || subject.startsWith('amf.internal') || subject.startsWith('amf.audit'))
    throw new AmfError(
      'INVALID_REQUEST',
      `subject filter must be within amf.> and not internal or audit subjects (got "${subject.slice(0, 100)}")`,
    );
  const rawLimit = url.searchParams.get('limit');
  const limit = rawLimit === null ? HISTORY_DEFAULT_LIMIT : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > HISTORY_MAX_LIMIT)
    throw new AmfError('INVALID_REQUEST', `limit must be an integer from 1 to ${HISTORY_MAX_LIMIT}`);
  const taskId = url.searchParams.get('task') ?? undefined;
  if (taskId !== undefined && (taskId.length === 0 || taskId.length > MAX_TASK_ID_CHARS))
    throw new AmfError('INVALID_REQUEST', `task must be 1 to ${MAX_TASK_ID_CHARS} characters`);
  return { subject, limit, ...(taskId !== undefined ? { taskId } : {}) };
}

/** The task id an event is about: its `amftaskid` extension, else a task id in its payload. */
export function eventTaskId(event: unknown): string | undefined {
  if (typeof event !== 'object' || event === null) return undefined;
  const e = event as { amftaskid?: unknown; data?: Record<string, unknown> };
  if (typeof e.amftaskid === 'string') return e.amftaskid;
  const d = e.data;
  if (d && typeof d === 'object') {
    for (const key of ['task_id', 'child_task_id'] as const) if (typeof d[key] === 'string') return d[key];
  }
  return undefined;
}

function decode(msg: StoredMsg): unknown {
  try {
    return msg.json<unknown>();
  } catch {
    return null;
  }
}

/** The newest messages of `stream` matching `query`, oldest first. */
export async function readHistory(
  jsm: JetStreamManager,
  stream: string,
  query: HistoryQuery,
  maxScan = HISTORY_MAX_SCAN,
): Promise<HistoryPage> {
  const info = await jsm.streams.info(stream);
  const { first_seq: first, last_seq: last, messages } = info.state;
  const found: HistoryEntry[] = [];
  let scanned = 0;
  let seq = last;
  while (messages > 0 && seq >= first && seq > 0 && found.length < query.limit && scanned < maxScan) {
    const batch: number[] = [];
    while (batch.length < READ_BATCH && seq >= first && seq > 0 && scanned + batch.length < maxScan)
      batch.push(seq--);
    scanned += batch.length;
    // Deleted or expired sequences read as null and are skipped.
    const msgs = await Promise.all(
      batch.map((s) => jsm.streams.getMessage(stream, { seq: s }).catch(() => null)),
    );
    for (const msg of msgs) {
      if (!msg || found.length >= query.limit) continue;
      if (!subjectMatches(query.subject, msg.subject)) continue;
      const event = decode(msg);
      if (query.taskId !== undefined && eventTaskId(event) !== query.taskId) continue;
      found.push({ seq: msg.seq, subject: msg.subject, time: msg.time.toISOString(), event });
    }
  }
  return { stream, events: found.reverse(), scanned, truncated: seq >= first && seq > 0 && messages > 0 };
}
