/**
 * Final results and the one canonical final of each task: a seed worker's own `amf.result.final`, or
 * an AMF worker's stored result (AMF_RESULTS) that the coordinator accepts and publishes. A result
 * from a worker that does not hold the task, or for a task that ended, is refused and warned
 * (`stale_result`), so no task gets a second ending.
 */
import { carryResultSignature } from '../../identity/eventSignature.js';
import { createEvent, type AmfEvent, type AmfEventOf } from '../../events/cloudEvent.js';
import { checkFinalPayload, HANDLER_TIMEOUT_CODE, type ClaimPayload } from '../../events/payloads.js';
import { terminalEventMsgId } from '../../events/subjects.js';
import type { TaskEndings } from './endings.js';
import type { LifecycleOptions, TaskFabric, TaskParts, TaskRecord } from './record.js';
import { isTerminal, type TaskState } from '../../events/taskStateMachine.js';
import type { ResultArrival, ResultDecision } from './resultIntake.js';
import { namesOffer } from './offerNonce.js';
import { UNTIL_CLOSED } from '../../fabric/eventBus.js';
import { toAmfError } from '../../errors.js';

/** The agent an event speaks for: its payload's `agent_id`, else the envelope's identity. */
export function senderAgent(event: AmfEvent): string {
  const agent = (event.data.payload as { agent_id?: unknown }).agent_id;
  return typeof agent === 'string' ? agent : event.data.auth_context.identity;
}

export interface TaskResultsDeps extends Pick<
  TaskParts,
  'fabric' | 'agents' | 'notices' | 'sender' | 'table'
> {
  endings: TaskEndings;
  sharedTaskState?: LifecycleOptions['sharedTaskState'];
  confirmLive?: LifecycleOptions['confirmLive'];
  waitsHere?: LifecycleOptions['waitsHere'];
  /** Re-announces a task whose handler ran past its timeout, for another worker; false if it cannot. */
  retryElsewhere?: (task: TaskRecord, agentId: string, message: string) => boolean;
}

export class TaskResults {
  constructor(private readonly deps: TaskResultsDeps) {}

  /** A final on the canonical subject: a seed worker's own, or one a coordinator accepted and relayed. */
  onFinal(event: AmfEventOf<'amf.result.final'>): void {
    const p = event.data.payload;
    if (typeof p.task_id !== 'string') return;
    const task = this.deps.table.active.get(p.task_id);
    const agentId = senderAgent(event);
    if (!task) {
      this.refuseLateResult(p.task_id, agentId);
      return;
    }
    if (task.claimedBy !== undefined && agentId !== task.claimedBy) {
      if (!task.owned && this.deps.sharedTaskState) {
        void this.settleForeign(task, event, agentId);
        return;
      }
      this.warnNotClaimant(task, agentId);
      return;
    }
    // Unclaimed: a failed final would end the task whoever sent it (failing needs no claim), so it
    // is held to a claim's rules: the tag, and the offer (a direct task's final under a mesh id).
    if (task.claimedBy === undefined) {
      if (this.notAdmittedForTag(task, agentId) || this.noOffer(task, event)) return;
      // It stands in for the claim its worker never sent (worker/deferredClaims.ts), as in accept().
      if (task.state === 'announced' && this.deps.table.applyTransition(task, 'amf.task.claim', agentId))
        task.claimedBy = agentId;
    }
    this.endWithFinal(task, event, agentId);
  }

  /**
   * A worker's final result, sent straight to this coordinator or stored in the durable results
   * stream (resultIntake.ts). It ends the task only while the task is open and this worker holds it;
   * then the coordinator publishes it as the task's one canonical `amf.result.final` (and on the
   * reply subject). A result from any other worker — a stale one that lost its claim, or one never
   * admitted — is refused with a warning naming it. Returns `unknown` for a task this coordinator
   * does not follow, and `not_owner` for an open task another coordinator announced: only that one
   * decides (a second decider could publish a second final before the first one's reached it). On
   * the result's last delivery such a task is `unknown` too: its coordinator is presumably gone, and
   * adoption decides.
   */
  accept(event: AmfEventOf<'amf.result.final'>, arrival: ResultArrival): ResultDecision {
    const p = event.data.payload;
    if (typeof p.task_id !== 'string') return 'refused';
    const agentId = senderAgent(event);
    const task = this.deps.table.active.get(p.task_id);
    if (!task) return this.refuseLateResult(p.task_id, agentId) ? 'refused' : 'unknown';
    // Another coordinator's task: only its owner decides. On the result's last delivery the owner
    // is presumably gone, and adoption decides through the shared state (one ending however many
    // coordinators follow the task; orphanResults.ts), not this coordinator's view of it.
    if (!task.owned) return arrival.path === 'direct' || !arrival.lastDelivery ? 'not_owner' : 'unknown';
    if (this.undecidedUntilConfirmed(task, agentId, arrival)) return 'not_owner';
    // Put on record with the final (relayFinal), or before a retry elsewhere that it precedes.
    let impliedClaim = false;
    if (task.claimedBy === undefined && task.state === 'announced' && this.deps.agents.isLive(agentId)) {
      // The result overtook the claim (they travel on different paths): the claim is implied, so
      // it is held to a claim's rules: only an agent admitted for the task's tag, which took the
      // announcement's offer, may take it.
      if (this.notAdmittedForTag(task, agentId) || this.noOffer(task, event)) return 'refused';
      if (!this.deps.table.applyTransition(task, 'amf.task.claim', agentId)) return 'refused';
      task.claimedBy = agentId;
      this.deps.table.changed(task);
      impliedClaim = true;
    }
    if (task.claimedBy !== agentId) {
      this.deps.notices.warn({
        reason: 'stale_result',
        message: `result for task ${task.taskId} from ${agentId} refused: the task is held by ${task.claimedBy ?? 'no worker'}`,
        task_id: task.taskId,
        agent_id: agentId,
      });
      return 'refused';
    }
    // The worker's handler ran past its timeout: another worker runs the task while retries remain.
    // Its result does not end the task, so it is answered `refused` (nothing of it is stored).
    if (p.status === 'failed' && p.error?.code === HANDLER_TIMEOUT_CODE) {
      if (impliedClaim) this.recordImpliedClaim(task, agentId);
      impliedClaim = false;
      if (this.deps.retryElsewhere?.(task, agentId, p.error.message)) return 'refused';
    }
    const relayed = createEvent({
      type: 'amf.result.final',
      sender: this.deps.sender,
      payload: p,
      taskId: task.taskId,
      traceId: task.traceId,
      ...(event.amfconfidence !== undefined ? { confidence: Number(event.amfconfidence) } : {}),
    });
    // A requester waiting in this process takes the final from the terminal listeners instead.
    const reply = this.deps.waitsHere?.(task.taskId) ? undefined : task.announce.data.payload.reply_subject;
    task.answeredFromQueue = true;
    const relay = () => this.relayFinal(task, event, relayed, reply, impliedClaim);
    // A child task's delegator takes the relayed final from its inbox as the task ends, so it is
    // relayed first; so is a final on a fabric without streams (nothing to wait for).
    if (task.resultInbox !== undefined || !this.deps.fabric.publishDurable) {
      const recorded = relay();
      if (recorded) task.recorded = recorded;
      this.endWithFinal(task, relayed, agentId);
      return 'accepted';
    }
    // The requester's answer does not wait for the relay to be encoded: the relay runs in a
    // microtask queued after the requester's, so its answer is written first. Both leave before
    // this turn ends (the relay's in the connection's next write), and everything that waits for
    // the record (the worker's answer, the terminal state in KV) waits for the relay's promise.
    let record: (recorded: Promise<unknown> | undefined) => void = () => undefined;
    task.recorded = new Promise<unknown>((resolve) => (record = resolve));
    try {
      this.endWithFinal(task, relayed, agentId);
    } finally {
      queueMicrotask(() => {
        try {
          record(relay());
        } catch (err) {
          record(Promise.reject(err instanceof Error ? err : toAmfError(err)));
        }
      });
    }
    return 'accepted';
  }

  /**
   * Publishes an accepted final as the task's canonical one (and on `reply`), with the worker's
   * result signature carried over (identity/eventSignature.ts), after the claim it stood in for
   * when its worker sent none. Returns the promise of its record, when the fabric has streams.
   */
  private relayFinal(
    task: TaskRecord,
    event: AmfEventOf<'amf.result.final'>,
    relayed: AmfEventOf<'amf.result.final'>,
    reply: string | undefined,
    impliedClaim: boolean,
  ): Promise<unknown> | undefined {
    if (impliedClaim) this.recordImpliedClaim(task, senderAgent(event));
    carryResultSignature(event, relayed);
    return publishCanonicalFinal(this.deps.fabric, relayed, reply);
  }

  /**
   * Puts the claim a final stood in for on record, ahead of the final in the same write, so the
   * task's history reads announce, claim, final as the state machine does. A worker whose handler
   * answers at once sends no claim of its own (worker/deferredClaims.ts). The record is the
   * coordinator's own event, naming the agent: other coordinators leave it to the final that
   * follows (lifecycle.ts), as they cannot check it as the agent's.
   */
  private recordImpliedClaim(task: TaskRecord, agentId: string): void {
    const payload: ClaimPayload = {
      task_id: task.taskId,
      agent_id: agentId,
      required_capability: task.tag,
      attempt: task.attempt,
    };
    const claim = createEvent({
      type: 'amf.task.claim',
      sender: this.deps.sender,
      payload,
      taskId: task.taskId,
      traceId: task.traceId,
    });
    if (this.deps.fabric.publishOwn) this.deps.fabric.publishOwn(claim, 'amf.task.claim');
    else this.deps.fabric.publish(claim, 'amf.task.claim');
  }

  /**
   * An unclaimed task's result from an agent offline here for silence (this coordinator may be the
   * one back from a partition, its claim still being checked): the shared registry is asked, and
   * the result is decided when it comes again (a direct result unanswered is stored by its worker;
   * a stored one is offered again), rather than refused while its claim is being accepted.
   */
  private undecidedUntilConfirmed(task: TaskRecord, agentId: string, arrival: ResultArrival): boolean {
    if (task.claimedBy !== undefined || task.state !== 'announced' || arrival.lastDelivery) return false;
    if (this.deps.agents.isLive(agentId)) return false;
    const asked = this.deps.confirmLive?.(agentId);
    if (!asked) return false;
    void asked.catch(() => false);
    return true;
  }

  /**
   * Another coordinator's task, ended with a final from another worker than the claimant seen here:
   * that coordinator died with the claimant, and the one that adopted the task took the result of
   * its redelivered work item. The shared state says so (the adopter writes it before it publishes
   * the final); without that, the final is not the claimant's and is ignored, as for an own task.
   */
  private async settleForeign(
    task: TaskRecord,
    event: AmfEventOf<'amf.result.final'>,
    agentId: string,
  ): Promise<void> {
    const shared = await this.deps.sharedTaskState?.(task.taskId).catch(() => undefined);
    if (this.deps.table.active.get(task.taskId) !== task) return; // ended meanwhile
    if (shared && isTerminal(shared.state as TaskState) && shared.claimed_by === agentId) {
      task.claimedBy = agentId;
      this.endWithFinal(task, event, agentId);
      return;
    }
    this.warnNotClaimant(task, agentId);
  }

  /**
   * This coordinator adopted a task it followed for another coordinator (orphanResults.ts): its
   * own canonical final does not come back to it, so its copy of the task ends here.
   */
  endAdoptedCopy(event: AmfEventOf<'amf.result.final'>): void {
    const task = this.deps.table.active.get(event.data.payload.task_id);
    if (!task || task.owned) return;
    const agentId = senderAgent(event);
    if (task.state === 'announced') this.deps.table.applyTransition(task, 'amf.task.claim', agentId);
    task.claimedBy = agentId;
    this.endWithFinal(task, event, agentId);
  }

  private warnNotClaimant(task: TaskRecord, agentId: string): void {
    this.deps.notices.warn({
      reason: 'invalid_transition',
      message: `result for task ${task.taskId} from ${agentId} ignored: the task is claimed by ${task.claimedBy}`,
      task_id: task.taskId,
      agent_id: agentId,
    });
  }

  /**
   * True (and warned `tag_not_admitted`) when `agentId` was not admitted for the task's tag: its
   * result may not stand in for a claim it could not have made.
   */
  private notAdmittedForTag(task: TaskRecord, agentId: string): boolean {
    if (this.deps.agents.admittedFor(agentId, task.tag)) return false;
    this.deps.notices.warn({
      reason: 'tag_not_admitted',
      message: `result for task ${task.taskId} from ${agentId} refused: the agent was not admitted for tag ${task.tag}`,
      task_id: task.taskId,
      agent_id: agentId,
    });
    return true;
  }

  /**
   * True (and warned `claim_without_offer`) when a result that stands in for a claim does not name
   * the offer of the task's announcement (offerNonce.ts).
   */
  private noOffer(task: TaskRecord, event: AmfEventOf<'amf.result.final'>): boolean {
    if (namesOffer(task, event)) return false;
    const agentId = senderAgent(event);
    this.deps.notices.warn({
      reason: 'claim_without_offer',
      message: `result for task ${task.taskId} from ${agentId} refused: the task is unclaimed and the result does not name the offer of its announcement`,
      task_id: task.taskId,
      agent_id: agentId,
    });
    return true;
  }

  /** Warns about a result for a task that already ended; false when the task is not known at all. */
  private refuseLateResult(taskId: string, agentId: string): boolean {
    const ended = this.deps.table.get(taskId);
    if (!ended) return false;
    // The relayed copy of a result this coordinator accepted comes back here: that is no news.
    if (ended.final && ended.final.data.payload.agent_id === agentId) return true;
    this.deps.notices.warn({
      reason: 'stale_result',
      message: `result for task ${taskId} from ${agentId} refused: the task already ended (${ended.state})`,
      task_id: taskId,
      agent_id: agentId,
    });
    return true;
  }

  private endWithFinal(task: TaskRecord, event: AmfEventOf<'amf.result.final'>, agentId: string): void {
    const p = event.data.payload;
    const problem = checkFinalPayload(p);
    task.final = event;
    // A child task's delegator takes its answer from its own inbox only (delegationClient.ts).
    if (task.resultInbox !== undefined) this.deps.fabric.publish(event, task.resultInbox);
    if (problem || p.status === 'failed') {
      const message = problem
        ? `malformed result: ${problem}`
        : (p.error?.message ?? 'worker reported failure');
      this.deps.endings.finish(task, 'fail', { reason: p.error?.code ?? 'worker_error', message }, agentId);
      return;
    }
    this.deps.endings.finish(
      task,
      'amf.result.final',
      { reason: 'completed', message: 'completed' },
      agentId,
    );
  }
}

/**
 * The requester hears the final on its reply subject at once (core NATS). The canonical copy goes
 * through JetStream and is retried until the stream acknowledges it: a stream without a leader for
 * a few seconds (a cluster node died) would otherwise drop it, and the task would have no terminal
 * event in its history although its client got the answer. The message id is the task's terminal
 * one, so neither a retry nor another coordinator's adoption of the same result is stored twice.
 * Returns the promise of the record (TaskRecord.recorded), when the fabric has streams.
 */
function publishCanonicalFinal(
  fabric: TaskFabric,
  final: AmfEventOf<'amf.result.final'>,
  reply: string | undefined,
): Promise<unknown> | undefined {
  if (!fabric.publishDurable) {
    fabric.publish(final, 'amf.result.final', ...(reply ? [reply] : []));
    return undefined;
  }
  // One encoding for both copies; the canonical copy comes back to this coordinator unread.
  return fabric.publishDurable(final, 'amf.result.final', {
    msgId: terminalEventMsgId(final.data.payload.task_id),
    // Retried for as long as this coordinator runs: its worker is answered `accepted` only once it
    // is stored (resultIntake.ts), so a record given up would be a result lost.
    giveUpMs: UNTIL_CLOSED,
    ...(reply ? { alsoOn: [reply] } : {}),
    ownEvent: true,
  });
}
