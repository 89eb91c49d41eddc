/**
 * The tasks a coordinator follows: those in flight and a bounded tail of ended ones (for `GET
 * /tasks/<id>` and late questions). Every state change goes through the state machine here, and a
 * change that the machine refuses becomes a policy warning instead.
 */
import { nextTaskState, type TaskTransition } from '../../events/taskStateMachine.js';
import type { TaskNotices, TaskRecord } from './record.js';

export class TaskTable {
  readonly active = new Map<string, TaskRecord>();
  private readonly recent = new Map<string, TaskRecord>();
  private readonly changeListeners = new Set<(task: TaskRecord) => void>();

  constructor(
    private readonly notices: TaskNotices,
    private readonly retainedTerminalTasks: number,
  ) {}

  get(taskId: string): TaskRecord | undefined {
    return this.active.get(taskId) ?? this.recent.get(taskId);
  }

  /** Called after every state change (for the shared task-state store). */
  onChange(listener: (task: TaskRecord) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  changed(task: TaskRecord): void {
    for (const l of this.changeListeners) l(task);
  }

  /** Moves a task through the state machine and tells the change listeners. */
  transition(task: TaskRecord, transition: TaskTransition, agentId?: string): boolean {
    if (!this.applyTransition(task, transition, agentId)) return false;
    this.changed(task);
    return true;
  }

  /** The state machine's verdict on `transition`; a rejected one is a policy warning and changes nothing. */
  applyTransition(task: TaskRecord, transition: TaskTransition, agentId?: string): boolean {
    const result = nextTaskState(task.state, transition);
    if (!result.ok) {
      this.notices.warn({
        reason: 'invalid_transition',
        message: `${transition} rejected for task ${task.taskId}: ${result.reason}`,
        task_id: task.taskId,
        ...(agentId ? { agent_id: agentId } : {}),
        details: { from: task.state, event: transition },
      });
      return false;
    }
    task.state = result.state;
    return true;
  }

  /** Moves an ended task to the recent tail, dropping the oldest beyond the retention bound. */
  retire(task: TaskRecord): void {
    this.active.delete(task.taskId);
    this.recent.set(task.taskId, task);
    if (this.recent.size > this.retainedTerminalTasks) {
      const oldest = this.recent.keys().next().value;
      if (oldest !== undefined) this.recent.delete(oldest);
    }
  }
}
