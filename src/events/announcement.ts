/**
 * Reading a task announcement from the fabric or the HTTP edge. The payload check and the reply
 * subject rule live here once, so the coordinator, its HTTP edge and the workers cannot drift apart:
 * a task may only name `amf.internal.reply.<its own task_id>` as reply subject (docs/decisions.md #8),
 * because a reply subject chosen by the announcer would let it make workers publish onto any internal
 * subject.
 */
import { checkAnnouncePayload, type AnnouncePayload } from './payloads.js';
import { SUBJECT_REPLY_PREFIX } from './subjects.js';

export interface Announcement {
  payload: AnnouncePayload;
  /** The reply subject to publish to: `amf.internal.reply.<task_id>`, or undefined when none may be used. */
  replySubject: string | undefined;
}

/** Why an announcement is not taken; `reason` doubles as the policy-notice reason code. */
export type AnnouncementProblem =
  | { reason: 'invalid_announce'; problem: string }
  | {
      reason: 'reply_subject_invalid';
      /** `reply_subject must be amf.internal.reply.<task_id>` */
      problem: string;
      taskId: string;
      expectedReplySubject: string;
    };

export type ParsedAnnouncement = ({ ok: true } & Announcement) | ({ ok: false } & AnnouncementProblem);

export interface ParseAnnouncementOptions {
  /**
   * What another reply subject means. `reject`: the announcement is refused (the coordinator, which
   * answers the announcer). `ignore`: the task is taken but no reply is sent there (a worker, which
   * cannot tell the announcer anything and still serves the task on the canonical subjects).
   */
  otherReplySubject: 'reject' | 'ignore';
}

/** Checks an announcement payload (untrusted: the envelope validator does not look into it). */
export function parseAnnouncement(payload: unknown, options: ParseAnnouncementOptions): ParsedAnnouncement {
  const problem = checkAnnouncePayload(payload);
  if (problem !== undefined) return { ok: false, reason: 'invalid_announce', problem };
  const p = payload as AnnouncePayload; // checked just above
  // Built from the prefix, not replySubject(), which throws on task ids that are not subject tokens;
  // such an id simply never matches.
  const expected = SUBJECT_REPLY_PREFIX + p.task_id;
  if (p.reply_subject === undefined) return { ok: true, payload: p, replySubject: undefined };
  if (p.reply_subject === expected) return { ok: true, payload: p, replySubject: expected };
  if (options.otherReplySubject === 'ignore') return { ok: true, payload: p, replySubject: undefined };
  return {
    ok: false,
    reason: 'reply_subject_invalid',
    problem: `reply_subject must be ${expected}`,
    taskId: p.task_id,
    expectedReplySubject: expected,
  };
}
