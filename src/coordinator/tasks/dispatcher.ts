/**
 * The requester side of a mesh task: announce, then follow the task's reply subject
 * (`amf.internal.reply.<task_id>`) until a final result or a terminal notice arrives. One wildcard
 * subscription serves every pending request, so a request costs no SUB/UNSUB round trips.
 */
import type { Subscription } from '@nats-io/transport-node';
import type { AmfEventOf, AnyAmfEvent } from '../../events/cloudEvent.js';
import type { ChatMessage, PartialPayload, ResultArtifactPayload, Usage } from '../../events/payloads.js';
import { SUBJECT_REPLY_PREFIX } from '../../events/subjects.js';
import type { EventBus } from '../../fabric/eventBus.js';
import { AmfError } from '../../errors.js';
import type { TaskLifecycle } from './lifecycle.js';
import type { InOrderCheck } from './record.js';

/** What a requester sees while its task runs. */

/** Worker output that reaches a requester from the reply subject. */
const REPLY_OUTPUT: ReadonlySet<string> = new Set([
  'amf.task.claim',
  'amf.task.progress',
  'amf.task.blocked',
  'amf.result.partial',
]);
export type TaskUpdate =
  | { kind: 'claimed'; agentId: string }
  | { kind: 'progress'; agentId: string; message?: string }
  | { kind: 'partial'; delta: string; seq: number }
  | { kind: 'blocked'; reason: string };

export interface TaskResult {
  taskId: string;
  traceId: string;
  agentId: string;
  text: string;
  data?: Record<string, unknown>;
  usage?: Usage;
  /** The worker's confidence (`amfconfidence`), 0..1. */
  confidence: number;
  /** Further artifacts of the answer, as the worker sent them. */
  artifacts?: ResultArtifactPayload[];
  /** The handler asked for its answer to be shown as a Message (A2A). */
  respondWith?: 'message';
}

export interface SubmitRequest {
  tag: string;
  task: string;
  messages?: ChatMessage[];
  stream?: boolean;
  timeoutMs: number;
  signal?: AbortSignal;
  traceId?: string;
  ttlSeconds?: number;
  maxRetries?: number;
  retryDelaySeconds?: number;
  input?: Record<string, unknown>;
  /** The A2A message id that started the task (handed to the handler as `ctx.messageId`). */
  messageId?: string;
  /** The mesh task id to use (a UUID), so a protocol's own task id can be the mesh's too; default: a new one. */
  taskId?: string;
  onUpdate?: (update: TaskUpdate) => void;
  /** Called synchronously once the task id is known. */
  onAnnounced?: (taskId: string, traceId: string) => void;
}

interface Pending {
  resolve: (result: TaskResult) => void;
  reject: (err: AmfError) => void;
  /** The requester went away: the task is cancelled and the promise rejected. */
  abandon: () => void;
  onUpdate: ((update: TaskUpdate) => void) | undefined;
  nextSeq: number;
  held: Map<number, string>;
  /** The attempt whose chunks `held` and `nextSeq` count. */
  attempt: number;
}

const IDLE_POLL_MS = 50;
const STOPPED_MESSAGE = 'the coordinator stopped before the task finished';

/** The error a request still waiting gets when the coordinator stops (its task is cancelled). */
export function stoppingError(taskId: string): AmfError {
  return new AmfError(
    'UNAVAILABLE',
    taskId
      ? `the coordinator is stopping: the answer to task ${taskId} was cut off; ask again once it is back`
      : 'the coordinator is stopping; ask again once it is back',
    taskId ? { task_id: taskId } : undefined,
  );
}

/** Submits tasks into the mesh and resolves them from their reply subjects. */
export class TaskDispatcher {
  private readonly pending = new Map<string, Pending>();
  private sub: Subscription | undefined;

  constructor(
    private readonly bus: EventBus,
    private readonly lifecycle: TaskLifecycle,
    /** The coordinator's check that worker output comes from the agent it names (eventAuthenticity.ts). */
    private readonly authenticate?: (event: AnyAmfEvent, intake: string) => boolean,
    /** The same check in arrival order, after the canonical copies handed to it before (record.ts). */
    private readonly authenticateInOrder?: InOrderCheck,
  ) {}

  start(): void {
    // Every ending reaches a waiting requester from the lifecycle, which judged it: the accepted
    // final (no copy of it is sent to the reply subject of a task waited on here), or the expiry or
    // failure (TTL, watchdog, policy, worker errors, other coordinators' denies).
    this.lifecycle.onTerminal(({ task, state }) => {
      const p = this.pending.get(task.taskId);
      if (!p) return;
      // The one accepted final (from the durable results stream or a seed worker's canonical copy).
      if (task.final) return this.onFinal(p, task.taskId, task.final);
      const code = state === 'expired' ? 'TASK_EXPIRED' : 'TASK_FAILED';
      p.reject(
        new AmfError(code, task.outcome?.message ?? `task ${state}`, {
          task_id: task.taskId,
          reason: task.outcome?.reason ?? state,
        }),
      );
    });
    // Reply copies are checked for shape only: the canonical copy of each event is fully validated
    // by the lifecycle, and onReply reads every payload field defensively.
    this.sub = this.bus.subscribe(
      `${SUBJECT_REPLY_PREFIX}>`,
      (event, subject) => this.onReply(event, subject),
      {
        validation: 'shape',
        // Every reply copy ends as an update to its requester: copies for tasks not waited on here
        // (ended, another coordinator's) or for a requester that takes no updates (a non-streaming
        // completion) are not even parsed.
        skipSubject: (subject) =>
          this.pending.get(subject.slice(SUBJECT_REPLY_PREFIX.length))?.onUpdate === undefined,
      },
    );
  }

  /**
   * The requester of `taskId` went away (its connection closed): the task is cancelled and its
   * `submit` rejected, as when its `signal` aborts. Cheaper than a signal where a request has no
   * other use for one. False when the task is not waited on here (any more).
   */
  abandon(taskId: string): boolean {
    const p = this.pending.get(taskId);
    p?.abandon();
    return p !== undefined;
  }

  /**
   * Resolves once no request waits here for a task that can end (a task kept while it waits for
   * its requester's input does not count), or after `graceMs`. The stop's drain: what is running
   * gets its answer before the rest is ended by {@link endForStop}.
   */
  async idle(graceMs: number): Promise<void> {
    const deadline = Date.now() + graceMs;
    const busy = () => [...this.pending.keys()].some((id) => !this.lifecycle.keptWhileWaiting(id));
    while (busy() && Date.now() < deadline) await new Promise((r) => setTimeout(r, IDLE_POLL_MS));
  }

  /**
   * The coordinator stops: every request still waiting for a task is answered UNAVAILABLE now and
   * its task cancelled (its worker stops; the record says failed), in that order and at once, so no
   * requester is told "stopped" about a task that then completes and would run twice when asked
   * again. A task that ended before this keeps the answer it already has. Tasks kept while they
   * wait for input are left to the next run.
   */
  endForStop(): void {
    for (const [taskId, p] of [...this.pending]) {
      if (this.lifecycle.keptWhileWaiting(taskId)) continue;
      p.reject(stoppingError(taskId));
      this.lifecycle.cancel(taskId, 'task_cancelled', STOPPED_MESSAGE);
    }
  }

  close(): void {
    this.sub?.unsubscribe();
    for (const [, p] of this.pending) p.reject(new AmfError('UNAVAILABLE', 'coordinator is shutting down'));
    this.pending.clear();
  }

  /** True while a request here waits for `taskId` (its final then reaches it in this process). */
  waits(taskId: string): boolean {
    return this.pending.has(taskId);
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  /**
   * Runs one task to its end. Rejects with NO_AGENT_FOR_TAG at once when nobody serves the tag,
   * TIMEOUT when no result came in time (the task is then failed so it still has a terminal event),
   * TASK_FAILED / TASK_EXPIRED when the mesh ended it.
   */
  submit(req: SubmitRequest): Promise<TaskResult> {
    if (req.signal?.aborted) return Promise.reject(new AmfError('INVALID_REQUEST', 'request was aborted'));
    return new Promise<TaskResult>((resolve, reject) => {
      let taskId = '';
      const timer = setTimeout(() => {
        if (!waiting.settle()) return;
        this.lifecycle.cancel(taskId, 'requester_timeout', `no result within ${req.timeoutMs} ms`);
        reject(
          new AmfError('TIMEOUT', `no result from the mesh within ${req.timeoutMs} ms`, { task_id: taskId }),
        );
      }, req.timeoutMs);
      const waiting = this.waitingRequest(
        () => taskId,
        req,
        resolve,
        reject,
        1,
        () => clearTimeout(timer),
      );
      const { pending, onAbort } = waiting;
      try {
        // The task id is chosen here so the reply slot exists before the announcement leaves.
        const wanted = req.taskId ?? crypto.randomUUID();
        if (this.pending.has(wanted) || this.lifecycle.get(wanted))
          throw new AmfError('INVALID_REQUEST', `task id ${wanted} is already in use`);
        taskId = wanted;
        this.pending.set(taskId, pending);
        const task = this.lifecycle.announce({
          tag: req.tag,
          task: req.task,
          taskId,
          ...(req.messages ? { messages: req.messages } : {}),
          ...(req.stream ? { stream: true } : {}),
          ...(req.traceId ? { traceId: req.traceId } : {}),
          ...(req.ttlSeconds !== undefined ? { ttlSeconds: req.ttlSeconds } : {}),
          ...(req.maxRetries !== undefined ? { maxRetries: req.maxRetries } : {}),
          ...(req.retryDelaySeconds !== undefined ? { retryDelaySeconds: req.retryDelaySeconds } : {}),
          ...(req.input ? { input: req.input } : {}),
          ...(req.messageId ? { messageId: req.messageId } : {}),
        });
        req.onAnnounced?.(taskId, task.traceId);
      } catch (err) {
        waiting.settle();
        reject(err instanceof AmfError ? err : new AmfError('INTERNAL', String(err)));
        return;
      }
      req.signal?.addEventListener('abort', onAbort, { once: true });
      timer.unref();
    });
  }

  /**
   * The requester's side of one task: its pending entry (settled once; `resolve` and `reject` run
   * after the entry is removed) and `onAbort`, which cancels the task when the requester goes away.
   * `settle()` marks it settled and cleans up, false when it already was; `release` runs on cleanup.
   */
  private waitingRequest(
    taskId: () => string,
    req: Pick<SubmitRequest, 'signal' | 'onUpdate'>,
    resolve: (r: TaskResult) => void,
    reject: (e: unknown) => void,
    attempt: number,
    release: () => void = () => undefined,
  ): { pending: Pending; onAbort: () => void; settle: () => boolean } {
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      release();
      req.signal?.removeEventListener('abort', onAbort);
      this.pending.delete(taskId());
      return true;
    };
    const onAbort = (): void => {
      if (!settle()) return;
      this.lifecycle.cancel(taskId(), 'requester_cancelled', 'the requester went away');
      reject(new AmfError('INVALID_REQUEST', 'request was aborted', { task_id: taskId() }));
    };
    const pending: Pending = {
      resolve: (r) => {
        if (settle()) resolve(r);
      },
      reject: (e) => {
        if (settle()) reject(e);
      },
      abandon: onAbort,
      onUpdate: req.onUpdate,
      nextSeq: 0,
      held: new Map(),
      attempt,
    };
    return { pending, onAbort, settle };
  }

  /**
   * Waits for the end of a task this coordinator follows but did not submit in this run (a task it
   * took over while it waits for input, TaskLifecycle.adoptWaiting), as `submit` waits for its own:
   * updates from the reply subject, the result, or the error that ended it. Aborting `signal`
   * cancels the task.
   */
  follow(
    taskId: string,
    req: Pick<SubmitRequest, 'signal' | 'onUpdate'> & { attempt?: number },
  ): Promise<TaskResult> {
    if (this.pending.has(taskId) || !this.lifecycle.get(taskId))
      return Promise.reject(new AmfError('INVALID_REQUEST', `task ${taskId} is not followed here`));
    if (req.signal?.aborted) return Promise.reject(new AmfError('INVALID_REQUEST', 'request was aborted'));
    return new Promise<TaskResult>((resolve, reject) => {
      const { pending, onAbort } = this.waitingRequest(() => taskId, req, resolve, reject, req.attempt ?? 1);
      this.pending.set(taskId, pending);
      req.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * A worker's output for a task waited on here, taken from the worker's own subject by this
   * coordinator (eventIntake.ts) instead of the reply subject: handed over at once, so it
   * reaches the requester before the final that follows it on the worker's connection.
   */
  takeReply(event: AnyAmfEvent, taskId: string): void {
    if (this.pending.get(taskId)?.onUpdate !== undefined) this.onReply(event, SUBJECT_REPLY_PREFIX + taskId);
  }

  private onReply(event: AnyAmfEvent, subject: string): void {
    const taskId = subject.slice(SUBJECT_REPLY_PREFIX.length);
    if (!this.pending.has(taskId)) return;
    // Output in anyone's name but a recorded claimant's is dropped before its (costly) check.
    const claimedBy = this.lifecycle.get(taskId)?.claimedBy;
    if (claimedBy !== undefined && (event.data.payload as { agent_id?: unknown }).agent_id !== claimedBy)
      return;
    // Decided after the canonical copy that arrived first (its claim names the claimant below).
    if (REPLY_OUTPUT.has(event.type) && this.authenticateInOrder)
      return this.authenticateInOrder(event, 'the reply subject', (ok) => {
        if (ok) this.onAuthenticReply(event, taskId);
      });
    if (REPLY_OUTPUT.has(event.type) && this.authenticate && !this.authenticate(event, 'the reply subject'))
      return;
    this.onAuthenticReply(event, taskId);
  }

  private onAuthenticReply(event: AnyAmfEvent, taskId: string): void {
    const p = this.pending.get(taskId);
    if (!p) return;
    const payload = event.data.payload as Record<string, unknown>;
    // Specialists may publish on reply subjects, so worker output counts only from the agent the
    // lifecycle accepted as claimant (its claim, on the canonical subject, was processed first).
    // Failures and expiry are not taken from reply subjects at all: they come from the lifecycle.
    const claimedBy = this.lifecycle.get(taskId)?.claimedBy;
    // Anyone who may publish on reply subjects could write in the claimant's name: only its own
    // signed output reaches the requester (checked above).
    if (claimedBy === undefined || payload.agent_id !== claimedBy) return;
    switch (event.type) {
      case 'amf.task.claim':
        p.onUpdate?.({
          kind: 'claimed',
          agentId: String(payload.agent_id ?? event.data.auth_context.identity),
        });
        return;
      case 'amf.task.progress':
        p.onUpdate?.({
          kind: 'progress',
          agentId: String(payload.agent_id ?? ''),
          ...(typeof payload.message === 'string' ? { message: payload.message } : {}),
        });
        return;
      case 'amf.task.blocked':
        p.onUpdate?.({ kind: 'blocked', reason: String(payload.reason ?? '') });
        return;
      case 'amf.result.partial':
        return this.onPartial(p, taskId, event.data.payload);
      // Endings come from the lifecycle (above), which accepted exactly one; the rest are not worker output.
      case 'amf.result.final':
      case 'amf.task.announce':
      case 'amf.task.delegate':
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
   * Delivers stream chunks in `seq` order, all from one execution: chunks held from an earlier
   * attempt are dropped when a retry's arrive, and once a chunk has been sent the task is marked
   * (`streamStarted`), so that losing its worker ends it instead of retrying: a retry's chunks would
   * be spliced after the ones the requester already has (retries.ts).
   */
  private onPartial(p: Pending, taskId: string, partial: PartialPayload): void {
    if (typeof partial.delta !== 'string' || !Number.isInteger(partial.seq)) return;
    const task = this.lifecycle.get(taskId);
    if (task && task.attempt !== p.attempt) {
      if (p.nextSeq > 0) return; // never: a streamed task is not retried
      p.attempt = task.attempt;
      p.held.clear();
    }
    if (partial.seq < p.nextSeq) return;
    p.held.set(partial.seq, partial.delta);
    if (p.held.size > 10_000) p.held.clear(); // a worker skipping seq numbers cannot grow memory
    let delta = p.held.get(p.nextSeq);
    while (delta !== undefined) {
      if (task) task.streamStarted = true;
      p.held.delete(p.nextSeq);
      p.onUpdate?.({ kind: 'partial', delta, seq: p.nextSeq });
      p.nextSeq += 1;
      delta = p.held.get(p.nextSeq);
    }
  }

  private onFinal(p: Pending, taskId: string, event: AmfEventOf<'amf.result.final'>): void {
    const f = event.data.payload;
    if (f.status !== 'completed' || typeof f.result?.text !== 'string') {
      p.reject(
        new AmfError('TASK_FAILED', f.error?.message ?? 'the worker reported a failure', {
          task_id: taskId,
          reason: f.error?.code ?? 'worker_error',
        }),
      );
      return;
    }
    const result: TaskResult = {
      taskId,
      traceId: event.amftraceid ?? taskId,
      agentId: f.agent_id,
      text: f.result.text,
      confidence: Number(event.amfconfidence),
    };
    if (f.result.data) result.data = f.result.data;
    if (f.result.artifacts) result.artifacts = f.result.artifacts;
    if (f.result.respond_with === 'message') result.respondWith = 'message';
    if (f.usage) result.usage = f.usage;
    p.resolve(result);
  }
}
