/**
 * Tasks another coordinator on the same NATS announced: followed here without timers (so a result
 * or a question about them can be answered), and ended here too when their coordinator denies them.
 */
import type { AmfEvent, AmfEventOf } from '../events/cloudEvent.js';
import { parseAnnouncement } from '../events/announcement.js';
import type { PolicyPayload } from '../events/payloads.js';
import type { TaskEndings } from './taskEndings.js';
import { taskRecordFromAnnouncement, type TaskNotices } from './taskRecord.js';
import type { TaskTable } from './taskTable.js';

export interface ForeignTaskDeps {
  table: TaskTable;
  notices: TaskNotices;
  endings: TaskEndings;
  now: number;
}

/** Tracks a task announced by another coordinator (ours come back too, and are already known). */
export function trackForeignAnnounce(event: AmfEventOf<'amf.task.announce'>, deps: ForeignTaskDeps): void {
  const parsed = parseAnnouncement(event.data.payload, { otherReplySubject: 'reject' });
  if (!parsed.ok) {
    if (parsed.reason === 'invalid_announce')
      deps.notices.warn({ reason: parsed.reason, message: `announcement dropped: ${parsed.problem}` });
    else
      deps.notices.warn({
        reason: parsed.reason,
        message: `announcement of task ${parsed.taskId} dropped: ${parsed.problem}`,
        task_id: parsed.taskId,
      });
    return;
  }
  if (deps.table.get(parsed.payload.task_id)) return; // our own announcement, or a republish
  const task = taskRecordFromAnnouncement(event, { owned: false, now: deps.now });
  deps.table.active.set(task.taskId, task);
}

/** A deny published by another coordinator ends the task here too. */
export function endOnForeignDeny(event: AmfEvent, deps: ForeignTaskDeps): void {
  const p = event.data.payload as Partial<PolicyPayload>;
  if (!p.terminal || typeof p.task_id !== 'string') return;
  const task = deps.table.active.get(p.task_id);
  if (!task || task.owned) return;
  deps.endings.finish(task, 'amf.policy.deny', {
    reason: p.reason ?? 'denied',
    message: p.message ?? 'denied',
  });
}
