/**
 * Retries (docs/decisions.md #6): a task that found no claimant within its TTL, or whose worker fell
 * silent or went offline, is announced again while it has retries left — with the next attempt
 * number — and otherwise ends as expired (never claimed) or failed (lost its worker).
 */
import { createEvent } from '../../events/cloudEvent.js';
import type { AnnouncePayload } from '../../events/payloads.js';
import { announceSubject } from '../../events/subjects.js';
import { isTerminal } from '../../events/taskStateMachine.js';
import type { TaskEndings } from './endings.js';
import { newOfferNonce, offerDigest } from './offerNonce.js';
import type { TaskParts, TaskRecord } from './record.js';

export interface RetryDeps extends TaskParts {
  endings: TaskEndings;
  /** Offers the (re-)announced task on the work queue, withdrawing the previous offer. */
  offerWork: (task: TaskRecord) => void;
}

export class TaskRetries {
  constructor(private readonly deps: RetryDeps) {}

  /** No claim within the TTL: republish after the retry delay, or expire with no retries left. */
  ttlExpired(task: TaskRecord): void {
    // A worker of its tag was lost meanwhile and may have taken it unclaimed: recovered as for a
    // lost claimant while loss retries remain (lifecycle.ts markOfferedToLostWorker).
    if (task.offeredToLostWorker && task.lossRetriesLeft > 0) {
      this.recoverFromLostWorker(
        task,
        'worker_offline',
        `task ${task.taskId} was not claimed within ${task.ttlSeconds}s and a worker of its tag went offline meanwhile (it may have taken it)`,
      );
      return;
    }
    const retrying = task.retriesLeft > 0;
    this.deps.notices.warn(
      {
        reason: 'task_ttl_expired',
        message: `task ${task.taskId} was not claimed within ${task.ttlSeconds}s${retrying ? `; republishing (${task.retriesLeft} retries left)` : ''}`,
        task_id: task.taskId,
        retrying,
        ...(retrying ? {} : { terminal: true, state: 'expired' as const }),
      },
      {
        traceId: task.traceId,
        onRecord: (recorded) => (task.recorded = recorded),
        ...(!retrying && task.announce.data.payload.reply_subject
          ? { extraSubject: task.announce.data.payload.reply_subject }
          : {}),
      },
    );
    if (!retrying) {
      this.deps.endings.finish(task, 'expire', {
        reason: 'task_ttl_expired',
        message: 'no claim within TTL',
      });
      return;
    }
    task.retriesLeft -= 1;
    this.deps.timers.armRetryDelay(task);
  }

  /** Publishes the next attempt of a task, unless nobody serves its tag any more. */
  reannounce(task: TaskRecord): void {
    if (isTerminal(task.state)) return;
    if (!this.deps.agents.servesTag(task.tag)) {
      this.deps.endings.fail(
        task,
        'no_agent_for_tag',
        `no live agent serves capability "${task.tag}" any more`,
      );
      return;
    }
    task.attempt += 1;
    delete task.claimedBy;
    // The new offer is one no lost worker took.
    delete task.offeredToLostWorker;
    if (!this.deps.table.transition(task, 'reannounce')) return;
    const payload: AnnouncePayload = {
      ...task.announce.data.payload,
      attempt: task.attempt,
      max_retries: task.retriesLeft,
    };
    // A new announcement is a new offer: the last one's nonce no longer claims the task.
    if (payload.offer_digest !== undefined) {
      task.offerNonce = newOfferNonce();
      payload.offer_digest = offerDigest(task.offerNonce);
    }
    const event = createEvent({
      type: 'amf.task.announce',
      sender: this.deps.sender,
      payload,
      taskId: task.taskId,
      traceId: task.traceId,
      ttlSeconds: task.ttlSeconds,
      ...(task.parentTaskId ? { parentId: task.parentTaskId } : {}),
      delegationChain: task.chain,
    });
    task.announce = event;
    task.lastActivity = this.deps.clock.now();
    this.deps.timers.armTtl(task);
    this.deps.fabric.publish(event, announceSubject(task.tag));
    this.deps.offerWork(task);
  }

  /** The watchdog saw no sign of the claimant for its whole window. */
  workerSilent(task: TaskRecord, silentForMs: number): void {
    this.recoverFromLostWorker(
      task,
      'worker_silent',
      `worker ${task.claimedBy ?? '?'} was silent for ${Math.round(silentForMs / 1000)}s`,
    );
  }

  /** The registry marked an agent offline: every task it held is recovered. */
  agentLost(agentId: string): void {
    for (const task of this.deps.table.active.values()) {
      if (
        task.owned &&
        task.claimedBy === agentId &&
        (task.state === 'claimed' || task.state === 'blocked')
      ) {
        this.recoverFromLostWorker(task, 'worker_offline', `worker ${agentId} went offline`);
      }
    }
  }

  /**
   * The claimant's handler ran past its timeout (worker/handlerTimeout.ts): the task goes to another
   * worker while retries remain, and never back to this one. False (the failure then ends the task)
   * when no retry is left, no other live agent serves the tag, or the requester already has chunks
   * of this execution's stream.
   */
  handlerTimedOut(task: TaskRecord, agentId: string, message: string): boolean {
    if (task.streamStarted) return false;
    const lossRetry = task.lossRetriesLeft > 0;
    if (!lossRetry && task.retriesLeft <= 0) return false;
    const excluded = (task.excludedAgents ??= new Set());
    excluded.add(agentId);
    if (!this.servedByOthers(task)) return false;
    this.deps.notices.warn(
      {
        reason: 'handler_timeout',
        message: `${message}; re-announcing task ${task.taskId} for another worker than ${agentId}`,
        task_id: task.taskId,
        agent_id: agentId,
        retrying: true,
      },
      { traceId: task.traceId },
    );
    if (lossRetry) task.lossRetriesLeft -= 1;
    else task.retriesLeft -= 1;
    this.reannounce(task);
    return true;
  }

  /**
   * True when an agent taking new work serves the task's tag besides the ones it may not go to again.
   * An excluded agent is subtracted only if it is counted: the worker that just timed out is often
   * already draining (its one slot stuck), and subtracting it again hid the other worker.
   */
  private servedByOthers(task: TaskRecord): boolean {
    const live = this.deps.agents.liveTags().get(task.tag) ?? 0;
    let excludedLive = 0;
    for (const agent of task.excludedAgents ?? [])
      if (this.deps.agents.offeredFor(agent, task.tag)) excludedLive++;
    return live > excludedLive;
  }

  /**
   * Re-announces a task whose worker vanished while retries remain, else fails it. A streaming task
   * whose requester already has chunks of that worker's execution is failed instead: a retry's
   * chunks would be spliced after them, an answer no execution produced.
   */
  private recoverFromLostWorker(
    task: TaskRecord,
    reason: 'worker_silent' | 'worker_offline',
    message: string,
  ): void {
    if (task.streamStarted) {
      this.deps.endings.fail(
        task,
        'stream_interrupted',
        `${message} after its answer had begun streaming; the stream ends here rather than continue with another execution's chunks`,
      );
      return;
    }
    const lossRetry = task.lossRetriesLeft > 0;
    if ((lossRetry || task.retriesLeft > 0) && this.deps.agents.servesTag(task.tag)) {
      this.deps.notices.warn(
        {
          reason,
          message: `${message}; re-announcing task ${task.taskId}`,
          task_id: task.taskId,
          retrying: true,
        },
        { traceId: task.traceId },
      );
      if (lossRetry) task.lossRetriesLeft -= 1;
      else task.retriesLeft -= 1;
      this.reannounce(task);
      return;
    }
    this.deps.endings.fail(task, reason, `${message}; no retries left`);
  }
}
