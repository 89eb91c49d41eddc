import { describe, expect, it } from 'vitest';
import { parseAnnouncement } from '../../src/events/announcement.js';

const base = { task_id: 'task-1', task: 'say hi', required_capability: 'echo' };

describe('parseAnnouncement', () => {
  it('takes a well-formed announcement without a reply subject', () => {
    const parsed = parseAnnouncement(base, { otherReplySubject: 'reject' });
    expect(parsed).toEqual({ ok: true, payload: base, replySubject: undefined });
  });

  it("honours the task's own reply subject (LOCKED #8)", () => {
    const payload = { ...base, reply_subject: 'amf.internal.reply.task-1' };
    for (const otherReplySubject of ['reject', 'ignore'] as const) {
      const parsed = parseAnnouncement(payload, { otherReplySubject });
      expect(parsed.ok && parsed.replySubject).toBe('amf.internal.reply.task-1');
    }
  });

  it("refuses another task's reply subject for the coordinator", () => {
    const parsed = parseAnnouncement(
      { ...base, reply_subject: 'amf.internal.reply.task-2' },
      { otherReplySubject: 'reject' },
    );
    expect(parsed).toEqual({
      ok: false,
      reason: 'reply_subject_invalid',
      problem: 'reply_subject must be amf.internal.reply.task-1',
      taskId: 'task-1',
      expectedReplySubject: 'amf.internal.reply.task-1',
    });
  });

  it('lets a worker take the task but not the foreign reply subject', () => {
    const parsed = parseAnnouncement(
      { ...base, reply_subject: 'amf.internal.raw' },
      { otherReplySubject: 'ignore' },
    );
    expect(parsed).toEqual({
      ok: true,
      payload: { ...base, reply_subject: 'amf.internal.raw' },
      replySubject: undefined,
    });
  });

  it('reports a malformed payload in either mode', () => {
    for (const otherReplySubject of ['reject', 'ignore'] as const) {
      const parsed = parseAnnouncement({ ...base, task_id: '' }, { otherReplySubject });
      expect(parsed).toEqual({
        ok: false,
        reason: 'invalid_announce',
        problem: 'payload.task_id must be a non-empty string',
      });
    }
    expect(parseAnnouncement(null, { otherReplySubject: 'ignore' }).ok).toBe(false);
  });
});
