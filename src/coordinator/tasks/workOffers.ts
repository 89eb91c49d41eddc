/**
 * The task's offers on the work queue (stream AMF_WORK): each (re-)announcement is stored once, and
 * the previous offer is withdrawn when the task is re-announced or ends, so no worker pulls a task
 * that is over and a redelivery cannot double a re-announcement. An offer the stream did not take
 * (NATS away, a replicated stream electing its leader) is tried again while the task waits for it.
 */
import { isTerminal } from '../../events/taskStateMachine.js';
import type { TaskFabric, TaskNotices, TaskRecord, TaskWorkQueue } from './record.js';
import type { LifecycleClock } from './timers.js';
import { jsonBytes } from '../../util/jsonBytes.js';

/** After a failed store the offer is tried again 0.5 s later, then at doubling intervals up to 5 s. */
export const OFFER_RETRY_FIRST_MS = 500;
export const OFFER_RETRY_MAX_MS = 5_000;

export class TaskWorkOffers {
  constructor(
    private readonly queue: TaskWorkQueue | undefined,
    private readonly notices: TaskNotices,
    private readonly clock: LifecycleClock,
    private readonly closed: () => boolean,
    /** Hands over the bytes the announcement was published with, so it is encoded once. */
    private readonly fabric?: Pick<TaskFabric, 'takeBytes'>,
    /** Told when an offer is stored for a task still waiting for it (its sequence is known). */
    private readonly onOffered?: (task: TaskRecord) => void,
    /** Agents no offer of a tag is for (the ones the operator disabled): they pass it on. */
    private readonly disabledFor?: (tag: string) => readonly string[],
  ) {}

  /**
   * Offers the task's current announcement on the work queue (after the core announce, which seed
   * workers in queue group `workers.<tag>` take). The offer's sequence is kept so a re-announcement
   * or the end of the task can withdraw it.
   */
  offer(task: TaskRecord): void {
    if (!this.queue) return;
    this.withdraw(task);
    this.store(task, task.announce, task.offerNonce, this.queue, 0);
  }

  /**
   * Stores `event` (the task's announcement) on the work queue. A failure is warned once per
   * announcement, and the offer tried again while the task still waits for it: announced, unclaimed,
   * this announcement, the coordinator running. Its TTL bounds the retries. A store that went
   * through although its ack was lost can leave a second copy: a worker that takes it is refused as
   * a second claimant, or finds the task over, and acknowledges it away.
   */
  private store(
    task: TaskRecord,
    event: TaskRecord['announce'],
    nonce: string | undefined,
    queue: TaskWorkQueue,
    failures: number,
  ): void {
    const bytes = this.bytesOf(event);
    const notFor = notForOf(task, this.disabledFor?.(task.tag) ?? []);
    queue.offer(bytes, task.tag, nonce, notFor).then(
      (seq) => {
        // The task moved on while the offer was stored: take the stale offer back at once. A task
        // its worker already answered needs nothing (that worker acknowledges the message itself):
        // a fast task often ends before the stream's ack for its offer comes back.
        if (task.answeredFromQueue && task.announce === event) return;
        if (isTerminal(task.state) || task.announce !== event) queue.withdraw(seq);
        else {
          task.workSeq = seq;
          // The shared state names the offer, so a sweep of this coordinator's tasks can withdraw it.
          this.onOffered?.(task);
        }
      },
      (err: unknown) => {
        const waiting = () =>
          !this.closed() && task.state === 'announced' && task.announce === event && task.owned;
        if (!waiting()) return;
        const delayMs = Math.min(OFFER_RETRY_FIRST_MS * 2 ** failures, OFFER_RETRY_MAX_MS);
        if (failures === 0)
          this.notices.warn({
            reason: 'work_queue_unavailable',
            message: `task ${task.taskId} not offered on the work queue yet: ${String(err)}; trying again every ${OFFER_RETRY_MAX_MS / 1000} s at most while it waits (its TTL applies)`,
            task_id: task.taskId,
          });
        this.clock.setTimeout(() => {
          if (waiting()) this.store(task, event, nonce, queue, failures + 1);
        }, delayMs);
      },
    );
  }

  /** The announcement's bytes; one too large for NATS is refused by the work queue, which warns. */
  private bytesOf(event: TaskRecord['announce']): Uint8Array {
    try {
      return this.fabric?.takeBytes?.(event) ?? jsonBytes(event);
    } catch {
      return jsonBytes(event);
    }
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

/** The agents an offer names as not for them: the task's excluded ones and the disabled ones. */
function notForOf(task: TaskRecord, disabled: readonly string[]): string[] | undefined {
  if (!task.excludedAgents?.size && disabled.length === 0) return undefined;
  return [...new Set([...(task.excludedAgents ?? []), ...disabled])];
}
