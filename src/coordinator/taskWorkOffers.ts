/**
 * The task's offers on the work queue (stream AMF_WORK): each (re-)announcement is offered once, and
 * the previous offer is withdrawn when the task is re-announced or ends, so no worker pulls a task
 * that is over and a redelivery cannot double a re-announcement.
 */
import { isTerminal } from '../events/taskStateMachine.js';
import type { TaskNotices, TaskRecord, TaskWorkQueue } from './taskRecord.js';

const encoder = new TextEncoder();

export class TaskWorkOffers {
  constructor(
    private readonly queue: TaskWorkQueue | undefined,
    private readonly notices: TaskNotices,
  ) {}

  /**
   * Offers the task's current announcement on the work queue (after the core announce, which seed
   * workers in queue group `workers.<tag>` take). The offer's sequence is kept so a re-announcement
   * or the end of the task can withdraw it.
   */
  offer(task: TaskRecord): void {
    const queue = this.queue;
    if (!queue) return;
    this.withdraw(task);
    const event = task.announce;
    const bytes = encoder.encode(JSON.stringify(event));
    queue.offer(bytes, task.tag).then(
      (seq) => {
        // The task moved on while the offer was stored: take the stale offer back at once. A task
        // its worker already answered needs nothing (that worker acknowledges the message itself):
        // a fast task often ends before the stream's ack for its offer comes back.
        if (task.answeredFromQueue && task.announce === event) return;
        if (isTerminal(task.state) || task.announce !== event) queue.withdraw(seq);
        else task.workSeq = seq;
      },
      (err: unknown) =>
        this.notices.warn({
          reason: 'work_queue_unavailable',
          message: `task ${task.taskId} not offered on the work queue: ${String(err)}; its TTL and retries apply`,
          task_id: task.taskId,
        }),
    );
  }

  withdraw(task: TaskRecord): void {
    if (task.workSeq === undefined) return;
    this.queue?.withdraw(task.workSeq);
    delete task.workSeq;
  }

  /** The offer was taken and will be acknowledged by its worker: only the bookkeeping goes. */
  forget(task: TaskRecord): void {
    delete task.workSeq;
  }
}
