/**
 * The shapes the task lifecycle works with: its options, a tracked task, an announcement request,
 * what terminal listeners are told and what the lifecycle's parts share. Kept apart so adapters can
 * type against them without the runtime; the one function here builds a record, so every tracked
 * task starts from the same fields.
 */
import type { AmfEvent, AmfEventOf, EventSender } from '../../events/cloudEvent.js';
import type { ChatMessage } from '../../events/payloads.js';
import type { TaskState } from '../../events/taskStateMachine.js';
import type { EventHandler, SubscribeOptions } from '../../fabric/eventBus.js';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../registry/policyNotices.js';
import type { TaskTable } from './table.js';
import type { LifecycleClock, TaskTimers, TimerHandle } from './timers.js';
import type { SilenceVerdict } from '../sharedLiveness.js';
import type { AmfError } from '../../errors.js';
import type { LogFn } from '../../log.js';

/**
 * The part of the fabric the lifecycle uses. EventBus is one; narrowing it to this lets timing tests
 * run the lifecycle on an in-memory bus instead of a nats-server.
 */
export interface TaskFabric {
  publish(event: AmfEvent, ...subjects: string[]): void;
  /** As publish, for an event the lifecycle already acts on: its echo is dropped unread (eventBus.ts). */
  publishOwn?(event: AmfEvent, ...subjects: string[]): void;
  /**
   * Publishes through JetStream and retries until the stream acknowledges (fabric/eventBus.ts); a
   * fabric without streams (an in-memory bus) leaves it out and gets a plain publish. `alsoOn`
   * subjects get the same bytes on core NATS first.
   */
  publishDurable?(
    event: AmfEvent,
    subject: string,
    options: { msgId: string; giveUpMs?: number; alsoOn?: readonly string[]; ownEvent?: boolean },
  ): Promise<'stored' | 'too_large' | 'gave_up'>;
  /** Throws PAYLOAD_TOO_LARGE when the fabric could not carry `event` (an in-memory bus need not check). */
  assertFits?(event: AmfEvent): void;
  /** The bytes assertFits kept for the event, handed over (the announcement's, for its work-queue offer). */
  takeBytes?(event: AmfEvent): Uint8Array;
  subscribe(subject: string, handler: EventHandler, options?: SubscribeOptions): { unsubscribe(): void };
}

/** What the lifecycle asks of the agent registry: who serves a tag, who is live, who went offline. */
export type TaskAgents = Pick<
  AgentRegistry,
  | 'servesTag'
  | 'isLive'
  | 'admittedFor'
  | 'offeredFor'
  | 'onChange'
  | 'liveTags'
  | 'isDisabled'
  | 'disabledFor'
>;

/** The coordinator's warnings and denials, as the lifecycle sends them. */
export type TaskNotices = Pick<PolicyNotices, 'warn' | 'deny'>;

/**
 * What the parts of the lifecycle (claims, results, retries) share: the fabric, the registry, the
 * notices, the coordinator's sender identity, the clock, the task table and the timers. The
 * lifecycle builds one set and hands it to each part.
 */
export interface TaskParts {
  fabric: TaskFabric;
  agents: TaskAgents;
  notices: TaskNotices;
  sender: EventSender;
  clock: LifecycleClock;
  table: TaskTable;
  timers: TaskTimers;
}

export interface LifecycleOptions {
  ttlSeconds: number;
  maxRetries: number;
  retryDelaySeconds: number;
  /** A claimed task is given up after ttl × factor seconds without any sign of its worker. */
  watchdogGraceFactor: number;
  /** The delegation policy (OPA): the depth limit (`data.policy.max_delegation_depth`) and the cycle rule live in Rego. */
  decideDelegation: (input: {
    chain: string[];
    delegator: string;
  }) => Promise<{ allow: boolean; reasons: string[]; max_depth: number }>;
  retainedTerminalTasks: number;
  maxActiveTasks?: number;
  /**
   * How often a task is re-announced when its worker is lost (offline, silent), on top of the
   * announcement's max_retries: a killed worker's tasks go to another worker by default.
   */
  workerLossRetries?: number;
  /** Time and timers (default: the system clock); tests pass a fake one to run TTLs without waiting. */
  clock?: LifecycleClock;
  /**
   * Looks up a worker's stored final result for a task (the durable results stream). Asked before a
   * lost worker's tasks are re-announced or failed: its result may already be stored but not yet
   * delivered, because results and heartbeats travel on different paths.
   */
  storedResult?: (taskId: string, agentId?: string) => Promise<AmfEventOf<'amf.result.final'> | undefined>;
  /**
   * The task's last state in the shared KV bucket (sharedState.ts). Read when another coordinator's
   * task ends with a final from another worker than the one seen claiming it: a coordinator that
   * adopted the task after its holder died wrote that ending there first (orphanResults.ts).
   */
  sharedTaskState?: (taskId: string) => Promise<{ state: string; claimed_by?: string } | undefined>;
  /**
   * Asked about an agent that is not live here when it claims a task (or its result stands in for
   * a claim): undefined when there is nothing to ask, else whether the shared registry holds it live
   * (it is live here again then). A coordinator back from a partition thus does not refuse a claim
   * whose handler already runs (sharedLiveness.ts).
   */
  confirmLive?: (agentId: string) => Promise<boolean> | undefined;
  /**
   * Asked before the tasks of an agent marked offline for silence are re-announced or failed:
   * `lost` = go ahead; `live` (the mesh still hears it) or `unreachable` (this coordinator is cut
   * off) = ask again shortly, unless the agent is back by then (sharedLiveness.ts).
   */
  confirmSilence?: (agentId: string) => Promise<SilenceVerdict>;
  /**
   * The work queue (stream AMF_WORK) that AMF workers pull announcements from when they have a free
   * slot. Without it, tasks reach workers only through the core announce subject (seed workers).
   */
  workQueue?: TaskWorkQueue;
  /**
   * Where an ending that could not be stored is reported (an error naming the task): the one case
   * where a task's terminal event may be missing from AMF_EVENTS.
   */
  log?: LogFn;
  /**
   * Why no new task may be announced now, if so: a full store (INSUFFICIENT_STORAGE) refuses every
   * task; an unreachable or frozen fabric (UNAVAILABLE) refuses a task whose tag has no live agent,
   * since agents only look offline while their heartbeats cannot arrive (fabricCondition.ts).
   */
  refuseNewTask?: (tagServed: boolean) => AmfError | undefined;
  /**
   * True while a requester in this process waits for the task (TaskDispatcher): it hears the final
   * from the terminal listeners, so the copy on the task's reply subject is left out for it. A task
   * announced any other way keeps that copy for whoever subscribed there.
   */
  waitsHere?: (taskId: string) => boolean;
  /**
   * Decides whether an agent's event (claim, progress, partial, blocked, delegate, final) really
   * comes from the agent it names; a refusal is warned by the check itself (eventAuthenticity.ts).
   * Without it, every well-formed event is believed (unit tests of the state machine).
   */
  authenticate?: (event: AmfEvent, intake: string) => boolean;
  /**
   * The same decision, asynchronous but in arrival order (EventAuthenticity.acceptInOrder): when
   * given, the fabric's claims, progress and finals are checked with it, off the event loop.
   */
  authenticateInOrder?: InOrderCheck;
}

/** An authenticity check that answers later, in the order the events were handed to it. */
export type InOrderCheck = (event: AmfEvent, intake: string, then: (ok: boolean) => void) => void;

/** What the lifecycle needs of the work queue (fabric/workQueue.ts WorkQueueWriter). */
export interface TaskWorkQueue {
  /**
   * Stores an announcement's bytes with its offer nonce (offerNonce.ts) and the agents that may not
   * take it (their workers pass it on); resolves the stream sequence.
   */
  offer(bytes: Uint8Array, tag: string, nonce?: string, notFor?: readonly string[]): Promise<number>;
  withdraw(seq: number): void;
}

/** A task as the coordinator tracks it. */
export interface TaskRecord {
  taskId: string;
  tag: string;
  state: TaskState;
  traceId: string;
  announce: AmfEventOf<'amf.task.announce'>;
  /** Agents that delegated on the way here, root first. */
  chain: string[];
  parentTaskId?: string;
  claimedBy?: string;
  attempt: number;
  retriesLeft: number;
  /** Re-announcements left for when the claiming worker is lost (LifecycleOptions.workerLossRetries). */
  lossRetriesLeft: number;
  retryDelaySeconds: number;
  ttlSeconds: number;
  createdAt: number;
  lastActivity: number;
  endedAt?: number;
  /** Only the coordinator that announced a task runs its timers. */
  owned: boolean;
  outcome?: { reason: string; message: string };
  /** The stream sequence of the task's current work-queue offer (withdrawn when it ends). */
  workSeq?: number;
  /**
   * The nonce of the current announcement's work-queue offer (its digest is the announcement's
   * `offer_digest`): known only to the coordinator that announced it and the worker that takes it.
   */
  offerNonce?: string;
  /** A child task's delegator inbox: its final goes there too (AnnounceRequest.resultInbox). */
  resultInbox?: string;
  /**
   * True once an AMF worker's result was accepted: that worker pulled the task from the work queue
   * and acknowledges (removes) its message itself, so the offer needs no withdrawal.
   */
  answeredFromQueue?: boolean;
  /** Its first state was written to the shared task-state store (sharedState.ts). */
  stateRecorded?: boolean;
  /**
   * Settles once the task's terminal event is stored in AMF_EVENTS (or storing it was given up).
   * The worker's final is answered, and the terminal state written to KV, only after it: a
   * coordinator that dies before then leaves the result with its worker (or in the results stream)
   * for another coordinator to adopt, never acknowledged with no record of it.
   */
  recorded?: Promise<unknown>;
  /** How storing the terminal event ended, once `recorded` settled (only `stored` is on record). */
  recordOutcome?: 'stored' | 'not_stored';
  /**
   * The requester was sent a streamed chunk of the current claimant's execution: from now on a
   * retry would splice another execution's chunks after it, so losing the worker ends the task.
   */
  streamStarted?: boolean;
  /**
   * A worker of the task's tag was lost while the task was unclaimed: it may have taken the offer
   * and died before its held claim left (worker/deferredClaims.ts), so running out of TTL counts as
   * losing that worker (a loss retry), not as finding no claimant. Cleared by a re-announcement.
   */
  offeredToLostWorker?: boolean;
  /** Agents that may not take the task again (a refused claim, a handler timeout): re-offers skip them. */
  excludedAgents?: Set<string>;
  /** The accepted final result (completed or failed by its worker), once the task has one. */
  final?: AmfEventOf<'amf.result.final'>;
  timer?: TimerHandle;
}

export interface AnnounceRequest {
  tag: string;
  task: string;
  messages?: ChatMessage[];
  stream?: boolean;
  taskId?: string;
  traceId?: string;
  ttlSeconds?: number;
  maxRetries?: number;
  retryDelaySeconds?: number;
  parentTaskId?: string;
  chain?: string[];
  input?: Record<string, unknown>;
  /** The A2A message id that started the task (announced as `message_id`). */
  messageId?: string;
  /** Ask workers to publish to the reply subject (default true). */
  withReplySubject?: boolean;
  /**
   * A subject in the delegator's own NATS inbox (a child task): the task's final is also sent there,
   * where no other agent can publish (worker/delegationClient.ts).
   */
  resultInbox?: string;
}

export interface TerminalInfo {
  task: TaskRecord;
  state: TaskState;
  durationMs: number;
}

/**
 * The record of a task as its announcement describes it, announced by this coordinator (`owned`, it
 * runs the timers) or by another one on the same NATS (followed without timers). Everything comes
 * from the announcement, so a republish or a peer's copy yields the same record.
 */
export function taskRecordFromAnnouncement(
  announce: AmfEventOf<'amf.task.announce'>,
  owner: { owned: boolean; now: number; workerLossRetries?: number },
): TaskRecord {
  const p = announce.data.payload;
  const task: TaskRecord = {
    taskId: p.task_id,
    tag: p.required_capability,
    state: 'announced',
    traceId: announce.amftraceid ?? p.task_id,
    announce,
    chain: p.delegation_chain ?? [],
    attempt: p.attempt ?? 1,
    retriesLeft: p.max_retries ?? 0,
    lossRetriesLeft: owner.workerLossRetries ?? 0,
    retryDelaySeconds: p.retry_delay_seconds ?? 0,
    ttlSeconds: announce.amfttl,
    createdAt: owner.now,
    lastActivity: owner.now,
    owned: owner.owned,
  };
  if (p.parent_task_id) task.parentTaskId = p.parent_task_id;
  return task;
}
