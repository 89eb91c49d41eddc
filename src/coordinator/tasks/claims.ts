/**
 * Claims in the coordinator: the first valid claim of an open task wins; a claim from an agent that
 * is not admitted or that the operator disabled, that does not name the offer of the task's
 * announcement (offerNonce.ts), for a task another agent holds, or for a task that already ended is
 * refused (the worker is told to stop with a cancel naming it). A task whose claim was refused is
 * offered again shortly so an admitted worker takes it.
 */
import { createEvent, type AmfEventOf } from '../../events/cloudEvent.js';
import type { CancelPayload } from '../../events/payloads.js';
import type { TaskParts, TaskRecord } from './record.js';
import { senderAgent } from './results.js';
import { namesOffer } from './offerNonce.js';

/** The pause before a task whose claim was refused (unadmitted agent) is offered again. */
const REOFFER_AFTER_REFUSAL_MS = 250;

export interface TaskClaimsDeps extends TaskParts {
  /** Whether tasks are offered on the work queue (AMF workers pull them). */
  hasWorkQueue: boolean;
  offerWork: (task: TaskRecord) => void;
  closed: () => boolean;
  /** Whether the shared registry holds live an agent that is not live here (LifecycleOptions). */
  confirmLive?: (agentId: string) => Promise<boolean> | undefined;
}

export class TaskClaims {
  constructor(private readonly deps: TaskClaimsDeps) {}

  /**
   * A claim on the canonical subject (its signature was checked at intake). `rechecked`: decided
   * again after the shared registry was read about its agent.
   */
  onClaim(event: AmfEventOf<'amf.task.claim'>, rechecked = false): void {
    // The envelope was validated, the payload not: read the id defensively.
    const taskId: unknown = event.data.payload.task_id;
    if (typeof taskId !== 'string') return;
    const agentId = senderAgent(event);
    const task = this.deps.table.active.get(taskId);
    if (!task) {
      // A claim for a task that already ended: that worker should stop, nobody waits for it.
      const ended = this.deps.table.get(taskId);
      if (ended) this.refuseClaim(ended, agentId, `task ${taskId} already ended (${ended.state})`);
      return;
    }
    if (!this.deps.agents.isLive(agentId)) {
      // Offline here for silence only: this coordinator may be the one that was cut off, and the
      // worker's handler runs already. Refused only if the shared registry does not hold it live.
      const asked = rechecked ? undefined : this.deps.confirmLive?.(agentId);
      if (asked) {
        void asked.then(
          () => !this.deps.closed() && this.onClaim(event, true),
          () => !this.deps.closed() && this.onClaim(event, true),
        );
        return;
      }
      this.refuseAndExclude(task, agentId, 'claim_from_unadmitted_agent', 'the agent is not admitted');
      return;
    }
    if (this.deps.agents.isDisabled(agentId) && task.claimedBy !== agentId) {
      // Disabled by the operator: it finishes what it holds, nothing new. Its offers name it as
      // not for it, so only an offer made before it was disabled gets here.
      this.refuseAndExclude(task, agentId, 'claim_from_disabled_agent', 'the operator disabled the agent');
      return;
    }
    if (!this.deps.agents.admittedFor(agentId, task.tag)) {
      // NATS keeps other tags' work queues closed to it; a claim by task id is refused here.
      this.deps.notices.warn({
        reason: 'tag_not_admitted',
        message: `claim of task ${taskId} by ${agentId} refused: the agent was not admitted for tag ${task.tag}`,
        task_id: taskId,
        agent_id: agentId,
      });
      this.refuseClaim(task, agentId, `the agent was not admitted for tag ${task.tag}`);
      return;
    }
    if ((task.state === 'claimed' || task.state === 'blocked') && task.claimedBy !== agentId) {
      this.deps.notices.warn({
        reason: 'duplicate_claim',
        message: `task ${taskId} is already claimed by ${task.claimedBy ?? 'another agent'}; claim by ${agentId} ignored`,
        task_id: taskId,
        agent_id: agentId,
      });
      this.refuseClaim(task, agentId, `the task is claimed by ${task.claimedBy ?? 'another agent'}`);
      return;
    }
    if (task.state === 'claimed' && task.claimedBy === agentId) return; // the same claim seen twice
    if (task.claimedBy === undefined && !namesOffer(task, event)) {
      // Not the claim of a worker that took this announcement's offer: a worker made to run a task
      // under this id another way (a direct call), or an agent that read the id somewhere.
      this.deps.notices.warn({
        reason: 'claim_without_offer',
        message: `claim of task ${taskId} by ${agentId} refused: it does not name the offer of the task's announcement (only the worker that took the work-queue message can claim it)`,
        task_id: taskId,
        agent_id: agentId,
      });
      this.refuseClaim(task, agentId, 'the claim does not name the offer of the announcement');
      return;
    }
    if (!this.deps.table.applyTransition(task, 'amf.task.claim', agentId)) return;
    // The claimant is part of the state the change listeners record (KV): set it before telling them.
    task.claimedBy = agentId;
    this.deps.table.changed(task);
    this.deps.timers.armWatchdog(task);
  }

  /**
   * An AMF worker that the registry does not hold live (typically one back from a NATS outage and
   * not re-admitted yet) can still pull a task from the work queue; its claim is refused and it
   * acknowledges that message away. The task, still unclaimed, is offered again shortly (a fresh
   * message, the old one withdrawn) so an admitted worker takes it rather than the TTL ending it.
   */
  /**
   * Warns and refuses a claim by an agent that may not have the task, and leaves that agent out of
   * the task's offers from now on: with free slots it would win the next offer too, and run the
   * handler once more for nothing.
   */
  private refuseAndExclude(
    task: TaskRecord,
    agentId: string,
    reason: 'claim_from_unadmitted_agent' | 'claim_from_disabled_agent',
    why: string,
  ): void {
    this.deps.notices.warn({
      reason,
      message: `claim of task ${task.taskId} by ${agentId} refused: ${why}`,
      task_id: task.taskId,
      agent_id: agentId,
    });
    this.refuseClaim(task, agentId, why);
    (task.excludedAgents ??= new Set()).add(agentId);
    this.reofferAfterRefusal(task);
  }

  private reofferAfterRefusal(task: TaskRecord): void {
    if (!task.owned || task.state !== 'announced' || !this.deps.hasWorkQueue) return;
    // Past its TTL the task waits for its retry, which offers the next attempt anyway.
    if (this.deps.clock.now() - task.lastActivity >= task.ttlSeconds * 1000) return;
    const announce = task.announce;
    this.deps.clock.setTimeout(() => {
      if (this.deps.closed() || task.state !== 'announced' || task.announce !== announce) return;
      if (this.deps.table.active.get(task.taskId) !== task) return;
      this.deps.offerWork(task);
    }, REOFFER_AFTER_REFUSAL_MS);
  }

  /** Tells the one worker whose claim lost to stop its handler (first valid claim wins). */
  private refuseClaim(task: TaskRecord, agentId: string, why: string): void {
    const payload: CancelPayload = {
      task_id: task.taskId,
      reason: 'claim_refused',
      message: `claim refused: ${why}`,
      agent_id: agentId,
    };
    this.deps.fabric.publish(
      createEvent({
        type: 'amf.task.cancel',
        sender: this.deps.sender,
        payload,
        taskId: task.taskId,
        traceId: task.traceId,
      }),
    );
  }
}
