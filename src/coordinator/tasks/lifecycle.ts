/**
 * Task lifecycle in the coordinator: announces tasks, follows every task event on the fabric through
 * the state machine, and makes sure each task ends in exactly one terminal event — completed by its
 * worker, or expired/failed by the coordinator (TTL with bounded retries, the watchdog for silent or
 * lost workers, cancellation). Delegations become child tasks after the cycle and depth checks.
 *
 * This file builds announcements, follows the tasks of other coordinators, wires the parts and
 * reads the fabric; the parts are the task table and its state changes (table.ts), the timers
 * (timers.ts), retries (retries.ts), the terminal-event writer (endings.ts), results (results.ts),
 * claims (claims.ts) and work-queue offers (workOffers.ts).
 */
import { randomUUID } from 'node:crypto';
import { parseAnnouncement } from '../../events/announcement.js';
import {
  createEvent,
  type AmfEvent,
  type AmfEventOf,
  type AnyAmfEvent,
  type EventSender,
} from '../../events/cloudEvent.js';
import {
  payloadTaskId,
  type AnnouncePayload,
  type CancelPayload,
  type PolicyPayload,
} from '../../events/payloads.js';
import { announceSubject, isCapabilityTag, isTaskId, replySubject } from '../../events/subjects.js';
import { AmfError } from '../../errors.js';
import { delegate } from './delegationGate.js';
import { newOfferNonce, offerDigest } from './offerNonce.js';
import { TaskEndings } from './endings.js';
import {
  taskRecordFromAnnouncement,
  type AnnounceRequest,
  type LifecycleOptions,
  type TaskAgents,
  type TaskFabric,
  type TaskNotices,
  type TaskParts,
  type TaskRecord,
  type TerminalInfo,
} from './record.js';
import { TaskRetries } from './retries.js';
import { TaskTable } from './table.js';
import { senderAgent, TaskResults } from './results.js';
import { TaskWorkOffers } from './workOffers.js';
import { TaskClaims } from './claims.js';
import type { ResultArrival, ResultDecision } from './resultIntake.js';
import { isOutputOfUntrackedTask, isTaskOutput } from './untrackedOutput.js';

import { systemClock, TaskTimers, type LifecycleClock } from './timers.js';
import { isTerminal } from '../../events/taskStateMachine.js';
import type { SilenceVerdict } from '../sharedLiveness.js';

/** How often the shared registry is asked again about an agent whose loss it does not confirm yet. */
const SILENCE_RECHECK_MS = 1_000;
/** Stored results looked up at once after a return from a partition. */
const STORED_LOOKUPS_AT_ONCE = 32;

export type {
  AnnounceRequest,
  LifecycleOptions,
  TaskAgents,
  TaskFabric,
  TaskNotices,
  TaskRecord,
  TerminalInfo,
} from './record.js';
export type { LifecycleClock, TimerHandle } from './timers.js';

/** Follows and drives the lifecycle of every task on the fabric. */
export class TaskLifecycle {
  private readonly subs: { unsubscribe(): void }[] = [];
  private readonly clock: LifecycleClock;
  private readonly table: TaskTable;
  private readonly active: Map<string, TaskRecord>;
  private readonly timers: TaskTimers;
  private readonly endings: TaskEndings;
  private readonly retries: TaskRetries;
  private readonly offers: TaskWorkOffers;
  private readonly results: TaskResults;
  private readonly claims: TaskClaims;
  private closed = false;
  /** Agents whose loss waits for the shared registry's word (silenceConfirmed), each with its wait. */
  private readonly silenceChecks = new Map<string, object>();
  /** Owned tasks that outlive a stop while they wait for input (keepWhileWaiting). */
  private readonly waitingKept = new Set<string>();

  constructor(
    private readonly bus: TaskFabric,
    private readonly registry: TaskAgents,
    private readonly sender: EventSender,
    private readonly notices: TaskNotices,
    private readonly options: LifecycleOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.table = new TaskTable(notices, options.retainedTerminalTasks);
    this.active = this.table.active;
    // The timers fire into the retry rules, which are built below: the handlers look them up late.
    this.timers = new TaskTimers(this.clock, options.watchdogGraceFactor, {
      ttlExpired: (task) => this.retries.ttlExpired(task),
      retryDue: (task) => this.retries.reannounce(task),
      workerSilent: (task, silentForMs) => this.retries.workerSilent(task, silentForMs),
    });
    this.endings = new TaskEndings(this.table, notices, this.timers, this.clock);
    const parts: TaskParts = {
      fabric: bus,
      agents: registry,
      notices,
      sender,
      clock: this.clock,
      table: this.table,
      timers: this.timers,
    };
    this.retries = new TaskRetries({
      ...parts,
      endings: this.endings,
      offerWork: (task) => this.offers.offer(task),
    });
    this.offers = new TaskWorkOffers(
      options.workQueue,
      notices,
      this.clock,
      () => this.closed,
      bus,
      (task) => this.table.changed(task),
      (tag) => registry.disabledFor(tag),
    );
    // An ended task's offer is withdrawn, so no worker pulls a task that is already over. A task an
    // AMF worker answered needs nothing: that worker acknowledges (removes) the message itself.
    this.endings.onTerminal(({ task }) => {
      if (task.answeredFromQueue) this.offers.forget(task);
      else this.offers.withdraw(task);
      this.followRecord(task);
    });
    this.results = new TaskResults({
      ...parts,
      endings: this.endings,
      retryElsewhere: (task, agentId, message) => this.retries.handlerTimedOut(task, agentId, message),
      ...(options.sharedTaskState ? { sharedTaskState: options.sharedTaskState } : {}),
      ...(options.confirmLive ? { confirmLive: options.confirmLive } : {}),
      ...(options.waitsHere ? { waitsHere: options.waitsHere } : {}),
    });
    this.claims = new TaskClaims({
      ...parts,
      hasWorkQueue: options.workQueue !== undefined,
      offerWork: (task) => this.offers.offer(task),
      closed: () => this.closed,
      ...(options.confirmLive ? { confirmLive: options.confirmLive } : {}),
    });
  }

  /**
   * Notes how the task's terminal event was stored. The record is retried for as long as this
   * coordinator runs (a full disk, a stream electing its leader), so only a stop can leave it
   * unstored: then the ending is missing from AMF_EVENTS, and the error names the task.
   */
  private followRecord(task: TaskRecord): void {
    const recorded = task.recorded;
    if (!recorded || !task.owned) return;
    const missed = (why: string) => {
      task.recordOutcome = 'not_stored';
      this.options.log?.('error', `the ending of task ${task.taskId} was not recorded: ${why}`, {
        task_id: task.taskId,
        state: task.state,
        ...(task.outcome ? { reason: task.outcome.reason } : {}),
      });
    };
    void recorded.then(
      (outcome) => {
        if (outcome === 'stored' || outcome === undefined) task.recordOutcome = 'stored';
        else missed(String(outcome));
      },
      (err: unknown) => missed(String(err)),
    );
  }

  /** Subscribes to the task and result events; delegations are shared among coordinators. */
  start(): void {
    const onInvalid = (errors: string[], subject: string) =>
      this.notices.warn({
        reason: 'invalid_event',
        message: `invalid event on ${subject}: ${errors.join('; ')}`,
      });
    const knows = (taskId: string) => this.table.get(taskId) !== undefined;
    this.subs.push(
      this.bus.subscribe('amf.task.>', (e) => this.onFabricEvent(e), {
        onInvalid,
        dropOwnEchoes: true,
        // Our own announcements come back on this subscription: known ids need no validation work.
        // Workers' output about tasks not followed here (direct tasks) would change nothing.
        skip: (parsed, subject) =>
          (subject.startsWith('amf.task.announce.') &&
            this.active.has(String((parsed as { amftaskid?: unknown } | null)?.amftaskid))) ||
          isOutputOfUntrackedTask(parsed, knows),
      }),
    );
    this.subs.push(
      this.bus.subscribe('amf.result.>', (e) => this.onFabricEvent(e), {
        onInvalid,
        dropOwnEchoes: true,
        // The canonical finals this coordinator relays come back here: their task already ended.
        skip: (parsed) =>
          (parsed as { data?: { auth_context?: { identity?: unknown } } } | null)?.data?.auth_context
            ?.identity === this.sender.identity || isOutputOfUntrackedTask(parsed, knows),
      }),
    );
    this.subs.push(this.bus.subscribe('amf.policy.deny', (e) => this.endOnForeignDeny(e)));
    this.subs.push(
      this.bus.subscribe(
        'amf.task.delegate',
        (e) => {
          if (e.type !== 'amf.task.delegate') return;
          // In order with the delegator's claim of the parent task, which may still be in its check.
          const inOrder = this.options.authenticateInOrder;
          if (inOrder) inOrder(e, e.type, (ok) => ok && !this.closed && this.onDelegate(e));
          else if (this.authentic(e)) this.onDelegate(e);
        },
        { queue: 'coordinators' },
      ),
    );
    this.registry.onChange((change) => {
      if (change.kind === 'offline')
        void this.workerLost(
          change.agent.record.agent_id,
          change.reason,
          change.agent.record.capability_tags ?? [],
        );
    });
  }

  /**
   * A worker went offline (goodbye or missed heartbeats): results it stored before it went are taken
   * first, then its remaining tasks are re-announced or failed by the retry rules. Missed heartbeats
   * are first checked against the shared registry (`confirmSilence`): a coordinator cut off from
   * the mesh hears nobody, and re-announcing tasks their workers still run would run them twice.
   */
  private async workerLost(agentId: string, reason: string, tags: readonly string[]): Promise<void> {
    // Before the wait below: an unclaimed task it may have taken is one it could not claim since.
    this.markOfferedToLostWorker(tags);
    if (reason === 'heartbeat_missed' && !(await this.silenceConfirmed(agentId))) return;
    const lookup = this.options.storedResult;
    if (lookup) {
      const held = [...this.active.values()].filter((t) => t.claimedBy === agentId);
      const stored = await Promise.all(held.map((t) => lookup(t.taskId, agentId).catch(() => undefined)));
      // Only tasks this coordinator announced: another coordinator's are decided by that one.
      for (const event of stored)
        if (event) this.results.accept(event, { path: 'stored', lastDelivery: false });
    }
    if (!this.closed) this.retries.agentLost(agentId);
  }

  /**
   * The unclaimed tasks of a lost worker's tags: it may hold one of their offers with its claim
   * still held back (worker/deferredClaims.ts). Their TTL then re-announces them as for a lost
   * claimant (retries.ts) instead of expiring them; a task it never took loses nothing by that.
   */
  private markOfferedToLostWorker(tags: readonly string[]): void {
    if (tags.length === 0) return;
    for (const task of this.active.values())
      if (task.owned && task.state === 'announced' && tags.includes(task.tag))
        task.offeredToLostWorker = true;
  }

  /**
   * Waits until the shared registry confirms that the mesh lost the agent too (true), or the agent
   * is live here again or holds no task of this coordinator's any more (false: nothing to recover).
   * Asked again every second while it is heard elsewhere or this coordinator cannot read the shared
   * state; a later loss of the same agent takes over from an earlier wait.
   */
  private async silenceConfirmed(agentId: string): Promise<boolean> {
    const confirm = this.options.confirmSilence;
    if (!confirm) return true;
    const token = {};
    this.silenceChecks.set(agentId, token);
    try {
      for (;;) {
        if (this.registry.isLive(agentId) || !this.holdsTasks(agentId)) return false;
        const verdict = await confirm(agentId).catch((): SilenceVerdict => 'unreachable');
        if (this.closed || this.silenceChecks.get(agentId) !== token) return false;
        if (this.registry.isLive(agentId)) return false;
        if (verdict === 'lost') return true;
        await new Promise<void>((resolve) => this.clock.setTimeout(resolve, SILENCE_RECHECK_MS));
        if (this.closed || this.silenceChecks.get(agentId) !== token) return false;
      }
    } finally {
      if (this.silenceChecks.get(agentId) === token) this.silenceChecks.delete(agentId);
    }
  }

  private holdsTasks(agentId: string): boolean {
    for (const task of this.active.values())
      if (task.owned && task.claimedBy === agentId && !isTerminal(task.state)) return true;
    return false;
  }

  /**
   * After this coordinator was cut off from the mesh (a reconnect: `'all'`; or agents it had marked
   * offline for silence heard again): results its workers stored meanwhile, because no answer came
   * back or another coordinator took them, are looked up for its open tasks (those `agents` hold)
   * and taken, so none of those tasks waits for its watchdog and is run again.
   */
  async takeStoredResults(agents: ReadonlySet<string> | 'all'): Promise<void> {
    const lookup = this.options.storedResult;
    if (!lookup || this.closed) return;
    const open = [...this.active.values()].filter(
      (t) =>
        t.owned &&
        !isTerminal(t.state) &&
        (agents === 'all' || (t.claimedBy !== undefined && agents.has(t.claimedBy))),
    );
    for (let i = 0; i < open.length; i += STORED_LOOKUPS_AT_ONCE) {
      const batch = open.slice(i, i + STORED_LOOKUPS_AT_ONCE);
      const stored = await Promise.all(
        batch.map((t) => lookup(t.taskId, t.claimedBy).catch(() => undefined)),
      );
      if (this.closed) return;
      for (const event of stored)
        if (event && this.active.has(event.data.payload.task_id))
          this.results.accept(event, { path: 'stored', lastDelivery: false });
    }
  }

  /** This coordinator adopted `event` as the ending of a task it followed for another coordinator. */
  endAdoptedCopy(event: AmfEventOf<'amf.result.final'>): void {
    this.results.endAdoptedCopy(event);
  }

  /** A worker's final (sent here or stored): taken while the task is open and held by it (results.ts). */
  acceptResult(event: AmfEventOf<'amf.result.final'>, arrival: ResultArrival): ResultDecision {
    return this.results.accept(event, arrival);
  }

  /** Called with every task that reaches a terminal state. */
  onTerminal(listener: (info: TerminalInfo) => void): () => void {
    return this.endings.onTerminal(listener);
  }

  /** Called after every state change (for the shared task-state store). */
  onChange(listener: (task: TaskRecord) => void): () => void {
    return this.table.onChange(listener);
  }

  get(taskId: string): TaskRecord | undefined {
    return this.table.get(taskId);
  }

  get activeCount(): number {
    return this.active.size;
  }

  /**
   * Announces a new task on `amf.task.announce.<tag>`. Throws `NO_AGENT_FOR_TAG` at once when no live
   * agent serves the tag, rather than letting the requester wait for a TTL.
   */
  announce(req: AnnounceRequest): TaskRecord {
    if (this.closed) throw new AmfError('UNAVAILABLE', 'coordinator is shutting down');
    if (!isCapabilityTag(req.tag))
      throw new AmfError('INVALID_REQUEST', `invalid capability tag "${req.tag}": expected [a-z0-9-]+`);
    const served = this.registry.servesTag(req.tag);
    const refusal = this.options.refuseNewTask?.(served);
    if (refusal) throw refusal;
    if (!served) throw new AmfError('NO_AGENT_FOR_TAG', `no live agent serves capability "${req.tag}"`);
    if (this.active.size >= (this.options.maxActiveTasks ?? 100_000))
      throw new AmfError('OVERLOADED', `too many tasks in flight (${this.active.size}); try again later`);
    const taskId = req.taskId ?? randomUUID();
    if (!isTaskId(taskId))
      throw new AmfError(
        'INVALID_REQUEST',
        `invalid task id ${JSON.stringify(req.taskId)}: expected [A-Za-z0-9-]{1,64}`,
      );
    if (this.get(taskId)) throw new AmfError('INVALID_REQUEST', `task ${taskId} already exists`);
    // Offered on the work queue: the offer's nonce is made now, its digest goes in the announcement.
    const nonce = this.options.workQueue ? newOfferNonce() : undefined;
    const event = announcementEvent(
      req,
      taskId,
      this.sender,
      this.options,
      nonce !== undefined ? offerDigest(nonce) : undefined,
    );
    // Before the task is recorded: NATS would refuse to publish it, leaving a task never announced.
    this.bus.assertFits?.(event);
    const task = taskRecordFromAnnouncement(event, {
      owned: true,
      now: this.clock.now(),
      workerLossRetries: this.options.workerLossRetries ?? 0,
    });
    if (nonce !== undefined) task.offerNonce = nonce;
    if (req.resultInbox !== undefined) task.resultInbox = req.resultInbox;
    this.active.set(taskId, task);
    this.timers.armTtl(task);
    if (this.bus.publishOwn) this.bus.publishOwn(event, announceSubject(req.tag));
    else this.bus.publish(event, announceSubject(req.tag));
    this.offers.offer(task);
    this.table.changed(task);
    return task;
  }

  /** Ends a task on the requester's behalf (timeout, disconnect, A2A cancel); the worker is told. */
  cancel(
    taskId: string,
    reason: 'requester_timeout' | 'requester_cancelled' | 'task_cancelled',
    message: string,
  ): boolean {
    const task = this.active.get(taskId);
    if (!task) return false;
    // The claimant (or, before a claim, any worker that picks it up late) stops its handler; the
    // terminal deny below stays the task's one ending, so the worker publishes no result after this.
    const payload: CancelPayload = {
      task_id: taskId,
      reason,
      message,
      ...(task.claimedBy ? { agent_id: task.claimedBy } : {}),
    };
    this.bus.publish(
      createEvent({ type: 'amf.task.cancel', sender: this.sender, payload, taskId, traceId: task.traceId }),
    );
    this.endings.fail(task, reason, message);
    return true;
  }

  /**
   * Lets an owned task outlive this coordinator's stop while it waits for its requester's next
   * message (A2A input-required: a person may answer after a restart). `keep` false undoes it.
   */
  keepWhileWaiting(taskId: string, keep: boolean): void {
    if (keep) this.waitingKept.add(taskId);
    else this.waitingKept.delete(taskId);
  }

  /** True while `taskId` is kept past a stop, waiting for its requester's input. */
  keptWhileWaiting(taskId: string): boolean {
    const task = this.active.get(taskId);
    return task?.state === 'blocked' && this.waitingKept.has(taskId);
  }

  /**
   * Takes over, as its owner, a task an earlier run of a coordinator left waiting for input (its
   * announcement, the agent holding it and the attempt, as the A2A edge stored them): the holder's
   * next claim, its result and a cancel then go through this lifecycle as for a task announced here.
   * Undefined when a task of that id is already followed here.
   */
  adoptWaiting(
    announce: AmfEventOf<'amf.task.announce'>,
    claimedBy: string,
    attempt: number,
  ): TaskRecord | undefined {
    const taskId = announce.data.payload.task_id;
    if (this.closed || this.table.get(taskId)) return undefined;
    const task = taskRecordFromAnnouncement(announce, {
      owned: true,
      now: this.clock.now(),
      workerLossRetries: this.options.workerLossRetries ?? 0,
    });
    task.state = 'blocked';
    task.claimedBy = claimedBy;
    task.attempt = attempt;
    // Its holder took the work-queue message and acknowledges it itself when it answers.
    task.answeredFromQueue = true;
    task.stateRecorded = true;
    this.active.set(taskId, task);
    this.waitingKept.add(taskId);
    this.table.changed(task);
    return task;
  }

  /**
   * Stops timers and subscriptions; tasks still in flight are failed so none is left without an end,
   * except those kept while they wait for input (keepWhileWaiting), which the next run takes over.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.subs) s.unsubscribe();
    for (const task of [...this.active.values()]) {
      if (task.owned && !this.keptWhileWaiting(task.taskId))
        this.endings.fail(task, 'task_cancelled', 'coordinator shut down before the task finished');
      else this.timers.clear(task);
    }
  }

  // --- fabric events -------------------------------------------------------------------------------

  /** True while `taskId` is a task this coordinator announced and has not ended. */
  owns(taskId: string): boolean {
    return this.active.get(taskId)?.owned === true;
  }

  /**
   * An agent's event about a task of this coordinator's, from the agent's own subject (eventIntake.ts):
   * taken as if it had arrived on its shared subject, where its echo is then dropped.
   */
  takeAgentEvent(event: AnyAmfEvent): void {
    if (!this.closed) this.onFabricEvent(event);
  }

  private onFabricEvent(event: AnyAmfEvent): void {
    // A claim a coordinator recorded for a final that stood in for it (results.ts): the final that
    // follows settles the task here; the record is not the agent's own event to check.
    if (event.type === 'amf.task.claim' && event.amfagentrole === 'coordinator') return;
    const inOrder = this.options.authenticateInOrder;
    if (inOrder && isTaskOutput(event)) {
      inOrder(event, event.type, (ok) => {
        if (ok && !this.closed) this.actOnFabricEvent(event);
      });
      return;
    }
    if (!this.authentic(event)) return;
    this.actOnFabricEvent(event);
  }

  private actOnFabricEvent(event: AnyAmfEvent): void {
    switch (event.type) {
      case 'amf.task.announce':
        return this.trackForeignAnnounce(event);
      case 'amf.task.claim':
        return this.claims.onClaim(event);
      case 'amf.task.progress':
      case 'amf.result.partial':
      case 'amf.task.blocked':
        return this.onWorkerUpdate(event, event.data.payload.task_id);
      case 'amf.task.delegate':
        // Progress of the parent task; the child task itself comes from the queue-group subscription.
        return this.onWorkerUpdate(
          event,
          event.data.payload.parent_task_id ?? payloadTaskId(event.data.payload),
        );
      case 'amf.result.final':
        return this.results.onFinal(event);
      // Cancellations and inputs are the coordinators' own; the other types do not arrive on these subjects.
      case 'amf.task.cancel':
      case 'amf.task.input':
      case 'amf.discovery.capability.advertise':
      case 'amf.discovery.agent.heartbeat':
      case 'amf.artifact.publish':
      case 'amf.evidence.publish':
      case 'amf.policy.warning':
      case 'amf.policy.deny':
        return;
      default: {
        const unhandled: never = event;
        return unhandled;
      }
    }
  }

  /**
   * The one intake check of agents' events on the fabric: claims, progress, partials, blocked,
   * delegations and finals (a final relayed by a coordinator is checked by its result signature).
   */
  private authentic(event: AnyAmfEvent): boolean {
    const check = this.options.authenticate;
    return !check || !isTaskOutput(event) || check(event, event.type);
  }

  private onWorkerUpdate(
    event: AmfEventOf<'amf.task.progress' | 'amf.result.partial' | 'amf.task.blocked' | 'amf.task.delegate'>,
    // Typed by the sender's promise only: the payload was not validated, so it is checked here.
    taskId: unknown,
  ): void {
    if (typeof taskId !== 'string') return;
    const task = this.active.get(taskId);
    if (!task) return;
    const agentId = senderAgent(event);
    if (task.claimedBy !== undefined && agentId !== task.claimedBy) {
      this.notices.warn({
        reason: 'invalid_transition',
        message: `${event.type} for task ${taskId} from ${agentId} ignored: the task is claimed by ${task.claimedBy}`,
        task_id: taskId,
        agent_id: agentId,
      });
      return;
    }
    if (!this.table.transition(task, event.type, agentId)) return;
    task.lastActivity = this.clock.now();
  }

  // --- tasks of other coordinators ----------------------------------------------------------------
  // A task another coordinator on the same NATS announced is followed here without timers, so a
  // result or a question about it can be answered, and ends here too when that coordinator denies it.

  /** Tracks a task announced by another coordinator (ours come back too, and are already known). */
  private trackForeignAnnounce(event: AmfEventOf<'amf.task.announce'>): void {
    const parsed = parseAnnouncement(event.data.payload, { otherReplySubject: 'reject' });
    if (!parsed.ok) {
      if (parsed.reason === 'invalid_announce')
        this.notices.warn({ reason: parsed.reason, message: `announcement dropped: ${parsed.problem}` });
      else
        this.notices.warn({
          reason: parsed.reason,
          message: `announcement of task ${parsed.taskId} dropped: ${parsed.problem}`,
          task_id: parsed.taskId,
        });
      return;
    }
    if (this.table.get(parsed.payload.task_id)) return; // our own announcement, or a republish
    const task = taskRecordFromAnnouncement(event, { owned: false, now: this.clock.now() });
    this.active.set(task.taskId, task);
  }

  /** A deny published by another coordinator ends the task here too. */
  private endOnForeignDeny(event: AmfEvent): void {
    const p = event.data.payload as Partial<PolicyPayload>;
    if (!p.terminal || typeof p.task_id !== 'string') return;
    const task = this.active.get(p.task_id);
    if (!task || task.owned) return;
    this.endings.finish(task, 'amf.policy.deny', {
      reason: p.reason ?? 'denied',
      message: p.message ?? 'denied',
    });
  }

  // --- delegation ----------------------------------------------------------------------------------

  private onDelegate(event: AmfEventOf<'amf.task.delegate'>): void {
    void delegate(event, {
      isKnownTask: (id) => this.get(id) !== undefined,
      activeTask: (id) => this.active.get(id),
      servesTag: (tag) => this.registry.servesTag(tag),
      decideDelegation: this.options.decideDelegation,
      notices: this.notices,
      announce: (req) => this.announce(req),
    });
  }
}

/**
 * The first announcement (attempt 1) of task `taskId`, sent by `sender`: the payload every worker
 * reads (the task, its capability tag, retry rules, reply subject, conversation and delegation
 * chain) in its CloudEvent. `digest` is the digest of the nonce its work-queue offer will carry
 * (offerNonce.ts), when it is offered there.
 */
function announcementEvent(
  req: AnnounceRequest,
  taskId: string,
  sender: EventSender,
  defaults: Pick<LifecycleOptions, 'ttlSeconds' | 'maxRetries' | 'retryDelaySeconds'>,
  digest?: string,
): AmfEventOf<'amf.task.announce'> {
  const payload: AnnouncePayload = {
    task_id: taskId,
    task: req.task,
    required_capability: req.tag,
    max_retries: req.maxRetries ?? defaults.maxRetries,
    retry_delay_seconds: req.retryDelaySeconds ?? defaults.retryDelaySeconds,
    attempt: 1,
  };
  if (req.withReplySubject !== false) payload.reply_subject = replySubject(taskId);
  if (req.messages) payload.messages = req.messages;
  if (req.stream) payload.stream = true;
  if (req.parentTaskId) payload.parent_task_id = req.parentTaskId;
  if (req.chain && req.chain.length > 0) payload.delegation_chain = req.chain;
  if (req.input) payload.input = req.input;
  if (req.messageId) payload.message_id = req.messageId;
  if (digest !== undefined) payload.offer_digest = digest;
  return createEvent({
    type: 'amf.task.announce',
    sender,
    payload,
    taskId,
    ttlSeconds: req.ttlSeconds ?? defaults.ttlSeconds,
    ...(req.traceId ? { traceId: req.traceId } : {}),
    ...(req.parentTaskId ? { parentId: req.parentTaskId } : {}),
    ...(req.chain ? { delegationChain: req.chain } : {}),
  });
}
