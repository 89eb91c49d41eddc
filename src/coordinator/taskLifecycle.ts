/**
 * Task lifecycle in the coordinator: announces tasks, follows every task event on the fabric through
 * the state machine, and makes sure each task ends in exactly one terminal event — completed by its
 * worker, or expired/failed by the coordinator (TTL with bounded retries, the watchdog for silent or
 * lost workers, cancellation). Delegations become child tasks after the cycle and depth checks.
 */
import { randomUUID } from 'node:crypto';
import type { Subscription } from '@nats-io/transport-node';
import {
  createEvent,
  type AmfEvent,
  type AmfEventOf,
  type AnyAmfEvent,
  type EventSender,
} from '../events/cloudEvent.js';
import {
  checkFinalPayload,
  payloadTaskId,
  type AnnouncePayload,
  type CancelPayload,
  type PolicyPayload,
} from '../events/payloads.js';
import { announceSubject, isCapabilityTag, isTaskId, replySubject } from '../events/subjects.js';
import { parseAnnouncement } from '../events/announcement.js';
import { isTerminal, nextTaskState, type TaskTransition } from '../events/taskStateMachine.js';
import type { EventBus } from '../fabric/eventBus.js';
import type { AgentRegistry } from './agentRegistry.js';
import { AmfError } from '../errors.js';
import type { PolicyNotices } from './policyNotices.js';
import { judgeDelegation } from './delegationGate.js';
import {
  taskRecordFromAnnouncement,
  type AnnounceRequest,
  type LifecycleOptions,
  type TaskRecord,
  type TerminalInfo,
} from './taskRecord.js';

export type { AnnounceRequest, LifecycleOptions, TaskRecord, TerminalInfo } from './taskRecord.js';

/** Follows and drives the lifecycle of every task on the fabric. */
export class TaskLifecycle {
  private readonly active = new Map<string, TaskRecord>();
  private readonly recent = new Map<string, TaskRecord>();
  private readonly subs: Subscription[] = [];
  private readonly terminalListeners = new Set<(info: TerminalInfo) => void>();
  private readonly changeListeners = new Set<(task: TaskRecord) => void>();
  private readonly now: () => number;
  private closed = false;

  constructor(
    private readonly bus: EventBus,
    private readonly registry: AgentRegistry,
    private readonly sender: EventSender,
    private readonly notices: PolicyNotices,
    private readonly options: LifecycleOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** Subscribes to the task and result events; delegations are shared among coordinators. */
  start(): void {
    const onInvalid = (errors: string[], subject: string) =>
      this.notices.warn({
        reason: 'invalid_event',
        message: `invalid event on ${subject}: ${errors.join('; ')}`,
      });
    this.subs.push(
      this.bus.subscribe('amf.task.>', (e) => this.onFabricEvent(e), {
        onInvalid,
        // Our own announcements come back on this subscription: known ids need no validation work.
        skip: (parsed, subject) =>
          subject.startsWith('amf.task.announce.') &&
          this.active.has(String((parsed as { amftaskid?: unknown } | null)?.amftaskid)),
      }),
    );
    this.subs.push(this.bus.subscribe('amf.result.>', (e) => this.onFabricEvent(e), { onInvalid }));
    this.subs.push(this.bus.subscribe('amf.policy.deny', (e) => this.onForeignDeny(e)));
    this.subs.push(
      this.bus.subscribe(
        'amf.task.delegate',
        (e) => {
          if (e.type === 'amf.task.delegate') this.onDelegate(e);
        },
        { queue: 'coordinators' },
      ),
    );
    this.registry.onChange((change) => {
      if (change.kind === 'offline') this.onAgentLost(change.agent.record.agent_id);
    });
  }

  /** Called with every task that reaches a terminal state. */
  onTerminal(listener: (info: TerminalInfo) => void): () => void {
    this.terminalListeners.add(listener);
    return () => this.terminalListeners.delete(listener);
  }

  /** Called after every state change (for the shared task-state store). */
  onChange(listener: (task: TaskRecord) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  get(taskId: string): TaskRecord | undefined {
    return this.active.get(taskId) ?? this.recent.get(taskId);
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
    if (!this.registry.servesTag(req.tag))
      throw new AmfError('NO_AGENT_FOR_TAG', `no live agent serves capability "${req.tag}"`);
    if (this.active.size >= (this.options.maxActiveTasks ?? 100_000))
      throw new AmfError('OVERLOADED', `too many tasks in flight (${this.active.size}); try again later`);
    const taskId = req.taskId ?? randomUUID();
    if (!isTaskId(taskId))
      throw new AmfError(
        'INVALID_REQUEST',
        `invalid task id ${JSON.stringify(req.taskId)}: expected [A-Za-z0-9-]{1,64}`,
      );
    if (this.get(taskId)) throw new AmfError('INVALID_REQUEST', `task ${taskId} already exists`);
    const ttlSeconds = req.ttlSeconds ?? this.options.ttlSeconds;
    const payload: AnnouncePayload = {
      task_id: taskId,
      task: req.task,
      required_capability: req.tag,
      max_retries: req.maxRetries ?? this.options.maxRetries,
      retry_delay_seconds: req.retryDelaySeconds ?? this.options.retryDelaySeconds,
      attempt: 1,
    };
    if (req.withReplySubject !== false) payload.reply_subject = replySubject(taskId);
    if (req.messages) payload.messages = req.messages;
    if (req.stream) payload.stream = true;
    if (req.parentTaskId) payload.parent_task_id = req.parentTaskId;
    if (req.chain && req.chain.length > 0) payload.delegation_chain = req.chain;
    if (req.input) payload.input = req.input;
    const event = createEvent({
      type: 'amf.task.announce',
      sender: this.sender,
      payload,
      taskId,
      ttlSeconds,
      ...(req.traceId ? { traceId: req.traceId } : {}),
      ...(req.parentTaskId ? { parentId: req.parentTaskId } : {}),
      ...(req.chain ? { delegationChain: req.chain } : {}),
    });
    const task = taskRecordFromAnnouncement(event, { owned: true, now: this.now() });
    this.active.set(taskId, task);
    this.armTtl(task);
    this.bus.publish(event, announceSubject(req.tag));
    this.changed(task);
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
    this.failTask(task, reason, message);
    return true;
  }

  /** Stops timers and subscriptions; tasks still in flight are failed so none is left without an end. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.subs) s.unsubscribe();
    for (const task of [...this.active.values()]) {
      if (task.owned) this.failTask(task, 'task_cancelled', 'coordinator shut down before the task finished');
      else clearTimeout(task.timer);
    }
  }

  // --- fabric events -------------------------------------------------------------------------------

  private onFabricEvent(event: AnyAmfEvent): void {
    switch (event.type) {
      case 'amf.task.announce':
        return this.onForeignAnnounce(event);
      case 'amf.task.claim':
        return this.onClaim(event);
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
        return this.onFinal(event);
      // Cancellations are the coordinators' own; the other types do not arrive on these subjects.
      case 'amf.task.cancel':
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

  /** Tracks tasks announced by another coordinator on the same NATS, without timers. */
  private onForeignAnnounce(event: AmfEventOf<'amf.task.announce'>): void {
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
    const p = parsed.payload;
    const existing = this.get(p.task_id);
    if (existing) return; // our own announcement (or a republish we already track)
    const task = taskRecordFromAnnouncement(event, { owned: false, now: this.now() });
    this.active.set(task.taskId, task);
  }

  private senderAgent(event: AmfEvent): string {
    const agent = (event.data.payload as { agent_id?: unknown }).agent_id;
    return typeof agent === 'string' ? agent : event.data.auth_context.identity;
  }

  private onClaim(event: AmfEventOf<'amf.task.claim'>): void {
    // The envelope was validated, the payload not: read the id defensively.
    const taskId: unknown = event.data.payload.task_id;
    if (typeof taskId !== 'string') return;
    const task = this.active.get(taskId);
    if (!task) return;
    const agentId = this.senderAgent(event);
    if (!this.registry.isLive(agentId)) {
      this.notices.warn({
        reason: 'claim_from_unadmitted_agent',
        message: `claim of task ${taskId} by ${agentId} refused: the agent is not admitted`,
        task_id: taskId,
        agent_id: agentId,
      });
      return;
    }
    if ((task.state === 'claimed' || task.state === 'blocked') && task.claimedBy !== agentId) {
      this.notices.warn({
        reason: 'duplicate_claim',
        message: `task ${taskId} is already claimed by ${task.claimedBy ?? 'another agent'}; claim by ${agentId} ignored`,
        task_id: taskId,
        agent_id: agentId,
      });
      return;
    }
    if (task.state === 'claimed' && task.claimedBy === agentId) return; // the same claim seen twice
    if (!this.transition(task, 'amf.task.claim', agentId)) return;
    task.claimedBy = agentId;
    this.armWatchdog(task);
  }

  private onWorkerUpdate(
    event: AmfEventOf<'amf.task.progress' | 'amf.result.partial' | 'amf.task.blocked' | 'amf.task.delegate'>,
    // Typed by the sender's promise only: the payload was not validated, so it is checked here.
    taskId: unknown,
  ): void {
    if (typeof taskId !== 'string') return;
    const task = this.active.get(taskId);
    if (!task) return;
    const agentId = this.senderAgent(event);
    if (task.claimedBy !== undefined && agentId !== task.claimedBy) {
      this.notices.warn({
        reason: 'invalid_transition',
        message: `${event.type} for task ${taskId} from ${agentId} ignored: the task is claimed by ${task.claimedBy}`,
        task_id: taskId,
        agent_id: agentId,
      });
      return;
    }
    if (!this.transition(task, event.type, agentId)) return;
    task.lastActivity = this.now();
  }

  private onFinal(event: AmfEventOf<'amf.result.final'>): void {
    const p = event.data.payload;
    const task = typeof p.task_id === 'string' ? this.active.get(p.task_id) : undefined;
    if (!task) return;
    const problem = checkFinalPayload(p);
    const agentId = this.senderAgent(event);
    if (task.claimedBy !== undefined && agentId !== task.claimedBy) {
      this.notices.warn({
        reason: 'invalid_transition',
        message: `result for task ${task.taskId} from ${agentId} ignored: the task is claimed by ${task.claimedBy}`,
        task_id: task.taskId,
        agent_id: agentId,
      });
      return;
    }
    if (problem || p.status === 'failed') {
      const message = problem
        ? `malformed result: ${problem}`
        : (p.error?.message ?? 'worker reported failure');
      this.finish(task, 'fail', { reason: p.error?.code ?? 'worker_error', message }, agentId);
      return;
    }
    this.finish(task, 'amf.result.final', { reason: 'completed', message: 'completed' }, agentId);
  }

  /** A deny published by another coordinator ends the task here too. */
  private onForeignDeny(event: AmfEvent): void {
    const p = event.data.payload as Partial<PolicyPayload>;
    if (!p.terminal || typeof p.task_id !== 'string') return;
    const task = this.active.get(p.task_id);
    if (!task || task.owned) return;
    this.finish(task, 'amf.policy.deny', { reason: p.reason ?? 'denied', message: p.message ?? 'denied' });
  }

  /** Moves a task through the state machine and tells the change listeners. */
  private transition(task: TaskRecord, transition: TaskTransition, agentId?: string): boolean {
    if (!this.applyTransition(task, transition, agentId)) return false;
    this.changed(task);
    return true;
  }

  /** The state machine's verdict on `transition`; a rejected one is a policy warning and changes nothing. */
  private applyTransition(task: TaskRecord, transition: TaskTransition, agentId?: string): boolean {
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

  // --- delegation ----------------------------------------------------------------------------------

  private onDelegate(event: AmfEventOf<'amf.task.delegate'>): void {
    void this.delegate(event);
  }

  /** Child task for an accepted delegation, else a terminal deny for the proposed child id. */
  private async delegate(event: AmfEventOf<'amf.task.delegate'>): Promise<void> {
    const p = event.data.payload;
    const verdict = await judgeDelegation(p, {
      isKnownTask: (id) => this.get(id) !== undefined,
      activeTask: (id) => this.active.get(id),
      servesTag: (tag) => this.registry.servesTag(tag),
      decideDelegation: this.options.decideDelegation,
    });
    const deny = (reason: string, message: string) => {
      const childId = typeof p?.child_task_id === 'string' ? p.child_task_id : undefined;
      this.notices.deny(
        {
          reason,
          message,
          ...(childId && isTaskId(childId) ? { task_id: childId } : {}),
          terminal: true,
          state: 'failed',
          details: { parent_task_id: p?.parent_task_id, agent_id: p?.agent_id },
        },
        { ...(event.amftraceid ? { traceId: event.amftraceid } : {}) },
      );
    };
    if (!verdict.ok) return deny(verdict.reason, verdict.message);
    const parent = verdict.parent;
    try {
      this.announce({
        tag: p.required_capability,
        task: p.task,
        taskId: p.child_task_id,
        traceId: parent.traceId,
        parentTaskId: parent.taskId,
        chain: [...parent.chain, p.agent_id],
        withReplySubject: false,
        ...(p.input ? { input: p.input } : {}),
      });
    } catch (err) {
      deny('delegation_invalid', `delegation refused: ${(err as Error).message}`);
    }
  }

  // --- timers --------------------------------------------------------------------------------------

  private armTtl(task: TaskRecord): void {
    clearTimeout(task.timer);
    if (!task.owned) return;
    task.timer = setTimeout(() => this.onTtl(task), task.ttlSeconds * 1000);
    task.timer.unref();
  }

  private onTtl(task: TaskRecord): void {
    if (task.state !== 'announced' || isTerminal(task.state)) return;
    const retrying = task.retriesLeft > 0;
    this.notices.warn(
      {
        reason: 'task_ttl_expired',
        message: `task ${task.taskId} was not claimed within ${task.ttlSeconds}s${retrying ? `; republishing (${task.retriesLeft} retries left)` : ''}`,
        task_id: task.taskId,
        retrying,
        ...(retrying ? {} : { terminal: true, state: 'expired' as const }),
      },
      {
        traceId: task.traceId,
        ...(!retrying && task.announce.data.payload.reply_subject
          ? { extraSubject: task.announce.data.payload.reply_subject }
          : {}),
      },
    );
    if (!retrying) {
      this.finish(task, 'expire', { reason: 'task_ttl_expired', message: 'no claim within TTL' });
      return;
    }
    task.retriesLeft -= 1;
    this.scheduleReannounce(task);
  }

  private scheduleReannounce(task: TaskRecord): void {
    clearTimeout(task.timer);
    task.timer = setTimeout(() => this.reannounce(task), task.retryDelaySeconds * 1000);
    task.timer.unref();
  }

  private reannounce(task: TaskRecord): void {
    if (isTerminal(task.state)) return;
    if (!this.registry.servesTag(task.tag)) {
      this.failTask(task, 'no_agent_for_tag', `no live agent serves capability "${task.tag}" any more`);
      return;
    }
    task.attempt += 1;
    delete task.claimedBy;
    if (!this.transition(task, 'reannounce')) return;
    const payload: AnnouncePayload = {
      ...task.announce.data.payload,
      attempt: task.attempt,
      max_retries: task.retriesLeft,
    };
    const event = createEvent({
      type: 'amf.task.announce',
      sender: this.sender,
      payload,
      taskId: task.taskId,
      traceId: task.traceId,
      ttlSeconds: task.ttlSeconds,
      ...(task.parentTaskId ? { parentId: task.parentTaskId } : {}),
      delegationChain: task.chain,
    });
    task.announce = event;
    task.lastActivity = this.now();
    this.armTtl(task);
    this.bus.publish(event, announceSubject(task.tag));
  }

  private watchdogWindowMs(task: TaskRecord): number {
    return task.ttlSeconds * this.options.watchdogGraceFactor * 1000;
  }

  private armWatchdog(task: TaskRecord): void {
    clearTimeout(task.timer);
    if (!task.owned) return;
    task.timer = setTimeout(() => this.onWatchdog(task), this.watchdogWindowMs(task));
    task.timer.unref();
  }

  private onWatchdog(task: TaskRecord): void {
    if (task.state !== 'claimed' && task.state !== 'blocked') return;
    if (task.state === 'blocked') return; // waiting for input is not silence
    const silentFor = this.now() - task.lastActivity;
    const window = this.watchdogWindowMs(task);
    if (silentFor < window) {
      task.timer = setTimeout(() => this.onWatchdog(task), window - silentFor);
      task.timer.unref();
      return;
    }
    this.recoverFromLostWorker(
      task,
      'worker_silent',
      `worker ${task.claimedBy ?? '?'} was silent for ${Math.round(silentFor / 1000)}s`,
    );
  }

  private onAgentLost(agentId: string): void {
    for (const task of this.active.values()) {
      if (
        task.owned &&
        task.claimedBy === agentId &&
        (task.state === 'claimed' || task.state === 'blocked')
      ) {
        this.recoverFromLostWorker(task, 'worker_offline', `worker ${agentId} went offline`);
      }
    }
  }

  /** Re-announces a task whose worker vanished while retries remain, else fails it. */
  private recoverFromLostWorker(
    task: TaskRecord,
    reason: 'worker_silent' | 'worker_offline',
    message: string,
  ): void {
    if (task.retriesLeft > 0 && this.registry.servesTag(task.tag)) {
      this.notices.warn(
        {
          reason,
          message: `${message}; re-announcing task ${task.taskId}`,
          task_id: task.taskId,
          retrying: true,
        },
        { traceId: task.traceId },
      );
      task.retriesLeft -= 1;
      this.reannounce(task);
      return;
    }
    this.failTask(task, reason, `${message}; no retries left`);
  }

  // --- endings -------------------------------------------------------------------------------------

  private failTask(
    task: TaskRecord,
    reason: Parameters<PolicyNotices['deny']>[0]['reason'],
    message: string,
  ): void {
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
  private finish(
    task: TaskRecord,
    ending: 'amf.result.final' | 'fail' | 'expire' | 'amf.policy.deny',
    outcome: { reason: string; message: string },
    agentId?: string,
  ): void {
    if (!this.applyTransition(task, ending, agentId)) return;
    const state = task.state;
    clearTimeout(task.timer);
    delete task.timer;
    task.outcome = outcome;
    task.endedAt = this.now();
    this.active.delete(task.taskId);
    this.recent.set(task.taskId, task);
    if (this.recent.size > this.options.retainedTerminalTasks) {
      const oldest = this.recent.keys().next().value;
      if (oldest !== undefined) this.recent.delete(oldest);
    }
    this.changed(task);
    const info: TerminalInfo = { task, state, durationMs: task.endedAt - task.createdAt };
    for (const l of this.terminalListeners) l(info);
  }

  private changed(task: TaskRecord): void {
    for (const l of this.changeListeners) l(task);
  }
}
