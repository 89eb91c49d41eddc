/**
 * The terminal-event writer: the one way a task ends, so each task ends exactly once — completed by
 * its worker, expired, or failed by the coordinator with a terminal `amf.policy.deny` that also goes
 * to the requester's reply subject.
 */
import { isTerminal } from '../../events/taskStateMachine.js';
import type { LifecycleClock, TaskTimers } from './timers.js';
import type { TaskTable } from './table.js';
import type { TaskNotices, TaskRecord, TerminalInfo } from './record.js';

/** The transitions that end a task. */
export type TaskEnding = 'amf.result.final' | 'fail' | 'expire' | 'amf.policy.deny';

export class TaskEndings {
  private readonly terminalListeners = new Set<(info: TerminalInfo) => void>();

  constructor(
    private readonly table: TaskTable,
    private readonly notices: TaskNotices,
    private readonly timers: TaskTimers,
    private readonly clock: LifecycleClock,
  ) {}

  /** Called with every task that reaches a terminal state. */
  onTerminal(listener: (info: TerminalInfo) => void): () => void {
    this.terminalListeners.add(listener);
    return () => this.terminalListeners.delete(listener);
  }

  /** Fails a task on the coordinator's decision, telling the claimant and the requester. */
  fail(task: TaskRecord, reason: Parameters<TaskNotices['deny']>[0]['reason'], message: string): void {
    if (isTerminal(task.state)) return;
    this.notices.deny(
      {
        reason,
        message,
        task_id: task.taskId,
        terminal: true,
        state: 'failed',
        ...(task.claimedBy ? { agent_id: task.claimedBy } : {}),
      },
      {
        traceId: task.traceId,
        onRecord: (recorded) => (task.recorded = recorded),
        ...(task.announce.data.payload.reply_subject
          ? { extraSubject: task.announce.data.payload.reply_subject }
          : {}),
      },
    );
    this.finish(task, 'fail', { reason, message });
  }

  /**
   * Ends a task through the state machine (a rejected ending is a warning and ends nothing), then
   * tells the change and terminal listeners once: the one terminal record of the task.
   */
  finish(
    task: TaskRecord,
    ending: TaskEnding,
    outcome: { reason: string; message: string },
    agentId?: string,
  ): void {
    if (!this.table.applyTransition(task, ending, agentId)) return;
    const state = task.state;
    this.timers.clear(task);
    task.outcome = outcome;
    task.endedAt = this.clock.now();
    this.table.retire(task);
    this.table.changed(task);
    const info: TerminalInfo = { task, state, durationMs: task.endedAt - task.createdAt };
    for (const l of this.terminalListeners) l(info);
  }
}
