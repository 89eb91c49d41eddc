/**
 * NATS subjects of the AMF fabric. Capability tags and task ids are validated before they are
 * spliced into a subject, so a crafted tag can never widen a subscription (`*`, `>`, `.`).
 */
import type { AmfEventType } from './eventTypes.js';
import { AmfError } from '../errors.js';

export const CAPABILITY_TAG_PATTERN = /^[a-z0-9-]{1,64}$/;
const TASK_ID_PATTERN = /^[A-Za-z0-9-]{1,64}$/;

export const SUBJECT_ALL_PUBLIC = 'amf.>';
export const SUBJECT_ANNOUNCE_PREFIX = 'amf.task.announce.';
export const SUBJECT_REPLY_PREFIX = 'amf.internal.reply.';
/** A worker's final result for a mesh task, sent straight to its coordinator (request/reply, core NATS). */
export const SUBJECT_FINAL_PREFIX = 'amf.internal.final.';
/**
 * A worker's final result for a mesh task goes here, into the durable AMF_RESULTS stream, when its
 * coordinator did not answer the direct copy: the coordinator that accepts it publishes the one
 * canonical final.
 */
export const SUBJECT_RESULT_PREFIX = 'amf.internal.result.';
export const SUBJECT_INTERNAL_RAW = 'amf.internal.raw';
export const SUBJECT_INTERNAL_CLASSIFIED = 'amf.internal.classified';

/** True when `tag` is a valid capability tag (`[a-z0-9-]+`, docs/decisions.md #17). */
export function isCapabilityTag(tag: unknown): tag is string {
  return typeof tag === 'string' && CAPABILITY_TAG_PATTERN.test(tag);
}

/** True when `id` is safe to use as a subject token. */
export function isTaskId(id: unknown): id is string {
  return typeof id === 'string' && TASK_ID_PATTERN.test(id);
}

/** Subject on which a task for `tag` is announced. */
export function announceSubject(tag: string): string {
  if (!isCapabilityTag(tag))
    throw new AmfError(
      'INVALID_REQUEST',
      `invalid capability tag ${JSON.stringify(tag)}: expected [a-z0-9-]+`,
    );
  return SUBJECT_ANNOUNCE_PREFIX + tag;
}

/** Queue group that workers serving `tag` join (NATS delivers each announcement to one member). */
export function workerQueueGroup(tag: string): string {
  return `workers.${tag}`;
}

/** The only reply subject a task may name (docs/decisions.md #8). */
export function replySubject(taskId: string): string {
  if (!isTaskId(taskId)) throw new AmfError('INVALID_REQUEST', `invalid task id ${JSON.stringify(taskId)}`);
  return SUBJECT_REPLY_PREFIX + taskId;
}

/** The work-queue subject of a task for `tag` (stream AMF_WORK, pulled by workers with a free slot). */
export function workSubject(tag: string): string {
  if (!isCapabilityTag(tag))
    throw new AmfError('INVALID_REQUEST', `invalid capability tag ${JSON.stringify(tag)}`);
  return `amf.work.${tag}`;
}

/** The durable consumer every AMF worker of `tag` pulls from (names may not contain dots). */
export function workConsumerName(tag: string): string {
  if (!isCapabilityTag(tag))
    throw new AmfError('INVALID_REQUEST', `invalid capability tag ${JSON.stringify(tag)}`);
  return `workers_${tag}`;
}

/** The durable subject of a worker's final result for `taskId` (docs/reliability.md). */
export function resultSubject(taskId: string): string {
  if (!isTaskId(taskId)) throw new AmfError('INVALID_REQUEST', `invalid task id ${JSON.stringify(taskId)}`);
  return SUBJECT_RESULT_PREFIX + taskId;
}

/**
 * The direct (core NATS, request/reply) subject of a worker's final result for `taskId`: the
 * coordinator that announced the task answers with its decision; without an answer the worker
 * stores the result on {@link resultSubject} instead (docs/reliability.md).
 */
export function finalSubject(taskId: string): string {
  if (!isTaskId(taskId)) throw new AmfError('INVALID_REQUEST', `invalid task id ${JSON.stringify(taskId)}`);
  return SUBJECT_FINAL_PREFIX + taskId;
}

/**
 * The JetStream message id of a task's terminal event in AMF_EVENTS (its canonical final, or the
 * coordinator's terminal deny), whoever publishes it: the stream keeps the first one stored within
 * its duplicate window (2 min) and drops the rest, so a coordinator that retries its record, and one
 * that adopts the task after the first died before answering the worker, store one ending between
 * them (docs/reliability.md).
 */
export function terminalEventMsgId(taskId: string): string {
  return `amf-terminal-${taskId}`;
}

/**
 * How long after a task's ending (its KV `ended_at`) a coordinator that finds the ending's record
 * possibly missing may record it again: under AMF_EVENTS' duplicate window (2 min), with room for
 * the coordinators' clocks to differ, so a record that was stored after all is dropped, never kept
 * twice.
 */
export const RECORD_AGAIN_WITHIN_MS = 90_000;

/** Subject an event of `type` is published on (subject = type, announcements carry the tag). */
export function subjectForType(type: AmfEventType, tag?: string): string {
  return type === 'amf.task.announce' && tag !== undefined ? announceSubject(tag) : type;
}

/**
 * NATS subject-pattern match (`*` one token, `>` the rest), used to filter SSE streams and the
 * event log without a broker round trip.
 */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    const token = p[i];
    if (token === '>') return s.length > i;
    if (i >= s.length) return false;
    if (token !== '*' && token !== s[i]) return false;
  }
  return p.length === s.length;
}

/** Validates a subscription pattern given by a client (`?subject=`). */
export function isValidSubjectPattern(pattern: string): boolean {
  if (pattern.length === 0 || pattern.length > 256) return false;
  const tokens = pattern.split('.');
  return tokens.every(
    (t, i) =>
      t.length > 0 && (/^[A-Za-z0-9_-]+$/.test(t) || t === '*' || (t === '>' && i === tokens.length - 1)),
  );
}
