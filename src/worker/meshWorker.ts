/**
 * A specialist worker on the fabric: joins the queue group `workers.<tag>` for each tag, claims what
 * NATS hands it, runs the handler, and publishes claim, progress, partial and final events to the
 * canonical subject and to the task's reply subject. Heartbeats carry its AgentRecord. `drain()`
 * stops claiming, lets in-flight tasks finish, then says goodbye.
 */
import { randomUUID } from 'node:crypto';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { createEvent, type AmfEvent, type EventSender } from '../events/cloudEvent.js';
import type { AgentRecord } from '../events/agentRecord.js';
import type {
  AnnouncePayload,
  CancelPayload,
  ChatMessage,
  DelegatePayload,
  FinalPayload,
  PolicyPayload,
} from '../events/payloads.js';
import { parseAnnouncement } from '../events/announcement.js';
import { announceSubject, workerQueueGroup } from '../events/subjects.js';
import type { AmfEventType } from '../events/eventTypes.js';
import { EventBus } from '../fabric/eventBus.js';
import {
  HandlerError,
  isAsyncIterable,
  toHandlerResult,
  type HandlerResult,
  type TaskContext,
  type TaskTools,
  type WorkerHandler,
} from './handlerApi.js';

export interface MeshWorkerOptions {
  name: string;
  tags: string[];
  trustDomain: string;
  /** Base URL where this worker's HTTP endpoints are reachable. */
  endpoint: string;
  handler: WorkerHandler;
  heartbeatSeconds: number;
  concurrency: number;
  version?: string;
  /** Extra protocols announced in the AgentRecord (e.g. MCP). */
  protocols?: string[];
  mcpEndpoint?: string;
  /** Gives each task its `ctx.tools` (the worker's MCP servers), bound to the task's signal. */
  tools?: (signal: AbortSignal) => TaskTools;
  log?: (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;
}

/** Outcome of running a task locally (also used by `POST /tasks/send`). */
export type LocalOutcome = { ok: true; result: HandlerResult } | { ok: false; code: string; message: string };

interface InFlight {
  controller: AbortController;
  done: Promise<void>;
}

/** The NATS side of a worker. */
export class MeshWorker {
  readonly agentId: string;
  private readonly bus: EventBus;
  private readonly sender: EventSender;
  private readonly subs: Subscription[] = [];
  private readonly inFlight = new Map<string, InFlight>();
  /** Direct tasks whose caller shows progress (A2A status messages). */
  private readonly progressListeners = new Map<string, (message: string) => void>();
  private readonly waiters = new Set<() => void>();
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private running = 0;
  private draining = false;
  private delegationSub: Subscription | undefined;
  private readonly delegations = new Map<
    string,
    { resolve: (t: string) => void; reject: (e: Error) => void }
  >();

  constructor(
    nc: NatsConnection,
    private readonly options: MeshWorkerOptions,
  ) {
    this.bus = new EventBus(nc);
    this.agentId = `spiffe://${options.trustDomain}/worker/${options.name}`;
    this.sender = {
      identity: this.agentId,
      source: options.endpoint,
      role: 'specialist',
      trustDomain: options.trustDomain,
    };
  }

  /** The advertisement this worker publishes with every heartbeat. */
  agentRecord(status: 'active' | 'draining' | 'offline' = 'active'): AgentRecord {
    const record: AgentRecord = {
      agent_id: this.agentId,
      display_name: this.options.name.slice(0, 64),
      endpoint: this.options.endpoint,
      protocols_supported: ['A2A/1.0', ...(this.options.protocols ?? [])],
      capability_tags: this.options.tags,
      trust_domain: this.options.trustDomain,
      visibility: 'local',
      version: this.options.version ?? '0.1.0',
      status,
      card_url: `${this.options.endpoint}/.well-known/agent-card.json`,
      heartbeat_seconds: this.options.heartbeatSeconds,
    };
    if (this.options.mcpEndpoint) record.mcp_endpoint = this.options.mcpEndpoint;
    return record;
  }

  /** Subscribes to the tags' queue groups and starts heartbeating. */
  async start(): Promise<void> {
    for (const tag of this.options.tags) {
      this.subs.push(
        this.bus.subscribe(
          announceSubject(tag),
          (e) => this.onAnnounce(e as AmfEvent<AnnouncePayload>, tag),
          {
            queue: workerQueueGroup(tag),
          },
        ),
      );
    }
    // Cancellations arrive on the public fabric (specialists cannot read amf.internal.>); delegation
    // results too, but that subscription exists only while delegations are pending (see delegate()).
    this.subs.push(this.bus.subscribe('amf.policy.deny', (e) => this.onDeny(e as AmfEvent<PolicyPayload>)));
    this.subs.push(this.bus.subscribe('amf.task.cancel', (e) => this.onCancel(e as AmfEvent<CancelPayload>)));
    this.heartbeat();
    this.heartbeatTimer = setInterval(() => this.heartbeat(), this.options.heartbeatSeconds * 1000);
    this.heartbeatTimer.unref();
    await this.bus.flush();
  }

  private heartbeat(status: 'active' | 'draining' | 'offline' = this.draining ? 'draining' : 'active'): void {
    this.bus.publish(
      createEvent({
        type: 'amf.discovery.agent.heartbeat',
        sender: this.sender,
        payload: this.agentRecord(status),
      }),
    );
  }

  private emit(
    type: AmfEventType,
    taskId: string,
    traceId: string,
    payload: object,
    reply?: string,
    confidence?: number,
  ): void {
    const event = createEvent({
      type,
      sender: this.sender,
      payload,
      taskId,
      traceId,
      ...(confidence !== undefined ? { confidence } : {}),
    });
    if (reply) this.bus.publish(event, type, reply);
    else this.bus.publish(event);
  }

  private onAnnounce(event: AmfEvent<AnnouncePayload>, tag: string): void {
    // Only the coordinator's reply subject for this task is honoured (LOCKED #8); another is ignored.
    const parsed = parseAnnouncement(event.data.payload, { otherReplySubject: 'ignore' });
    if (!parsed.ok) return;
    const { payload: p, replySubject: reply } = parsed;
    if (this.draining) return; // a drained worker claims nothing; the TTL brings the task to another worker
    const traceId = event.amftraceid ?? p.task_id;
    this.emit(
      'amf.task.claim',
      p.task_id,
      traceId,
      { task_id: p.task_id, agent_id: this.agentId, required_capability: tag, attempt: p.attempt ?? 1 },
      reply,
    );
    const messages: ChatMessage[] = p.messages ?? [{ role: 'user', content: p.task }];
    const controller = new AbortController();
    const done = this.runWithSlot(async () => {
      await this.execute(
        {
          taskId: p.task_id,
          traceId,
          tag,
          text: p.task,
          messages,
          stream: p.stream === true,
          attempt: p.attempt ?? 1,
          ...(p.input ? { input: p.input } : {}),
        },
        controller,
        reply,
      );
    }).finally(() => this.inFlight.delete(p.task_id));
    this.inFlight.set(p.task_id, { controller, done });
  }

  /** Bounds concurrent handler executions; tasks beyond the bound wait their turn (already claimed). */
  private async runWithSlot(fn: () => Promise<void>): Promise<void> {
    while (this.running >= this.options.concurrency) {
      await new Promise<void>((resolve) => {
        const w = () => {
          this.waiters.delete(w);
          resolve();
        };
        this.waiters.add(w);
      });
    }
    this.running++;
    try {
      await fn();
    } finally {
      this.running--;
      const next = this.waiters.values().next().value;
      if (next) next();
    }
  }

  /**
   * Runs a task that reached this worker directly (A2A, `POST /tasks/send`) with the same claim,
   * progress, partial and final events as a mesh task, so the mesh UI sees it. A cancelled direct
   * task ends with a failed final (code `cancelled`): no coordinator ends it for us.
   */
  async runDirect(
    task: Omit<TaskContext, 'signal' | 'progress' | 'delegate'>,
    controller: AbortController,
    onChunk?: (delta: string) => void,
    onProgress?: (message: string) => void,
  ): Promise<LocalOutcome> {
    if (this.inFlight.has(task.taskId))
      return { ok: false, code: 'duplicate_task', message: `task ${task.taskId} is already running here` };
    this.emit('amf.task.claim', task.taskId, task.traceId, {
      task_id: task.taskId,
      agent_id: this.agentId,
      required_capability: task.tag,
      attempt: task.attempt,
    });
    let outcome: LocalOutcome = { ok: false, code: 'cancelled', message: 'task cancelled' };
    if (onProgress) this.progressListeners.set(task.taskId, onProgress);
    const done = this.runWithSlot(async () => {
      outcome = await this.execute(task, controller, undefined, onChunk, true);
    }).finally(() => {
      this.inFlight.delete(task.taskId);
      this.progressListeners.delete(task.taskId);
    });
    this.inFlight.set(task.taskId, { controller, done });
    await done;
    return outcome;
  }

  private async execute(
    task: Omit<TaskContext, 'signal' | 'progress' | 'delegate'>,
    controller: AbortController,
    reply: string | undefined,
    onChunk?: (delta: string) => void,
    direct = false,
  ): Promise<LocalOutcome> {
    let seq = 0;
    let outcome: LocalOutcome = await this.runHandler(
      task,
      controller.signal,
      (delta) => {
        this.emit(
          'amf.result.partial',
          task.taskId,
          task.traceId,
          { task_id: task.taskId, agent_id: this.agentId, seq: seq++, delta },
          reply,
        );
        onChunk?.(delta);
      },
      reply,
    );
    if (controller.signal.aborted) {
      // Mesh task: the coordinator already ended it. Direct task: this final is its one ending.
      if (!direct) return outcome;
      outcome = { ok: false, code: 'cancelled', message: 'task cancelled' };
    }
    const payload: FinalPayload = outcome.ok
      ? {
          task_id: task.taskId,
          agent_id: this.agentId,
          status: 'completed',
          result: {
            text: outcome.result.text,
            ...(outcome.result.data ? { data: outcome.result.data } : {}),
          },
          ...(outcome.result.usage ? { usage: outcome.result.usage } : {}),
        }
      : {
          task_id: task.taskId,
          agent_id: this.agentId,
          status: 'failed',
          error: { code: outcome.code, message: outcome.message },
        };
    this.emit(
      'amf.result.final',
      task.taskId,
      task.traceId,
      payload,
      reply,
      outcome.ok ? outcome.result.confidence : 0,
    );
    return outcome;
  }

  /**
   * Runs the handler for one task and collects its answer; `onChunk` receives streamed chunks. Used by
   * mesh tasks and by direct HTTP submissions alike.
   */
  async runHandler(
    task: Omit<TaskContext, 'signal' | 'progress' | 'delegate'>,
    signal: AbortSignal,
    onChunk?: (delta: string) => void,
    reply?: string,
  ): Promise<LocalOutcome> {
    const ctx: TaskContext = {
      ...task,
      signal,
      progress: (message, percent) => {
        this.emit(
          'amf.task.progress',
          task.taskId,
          task.traceId,
          {
            task_id: task.taskId,
            agent_id: this.agentId,
            message,
            ...(percent !== undefined ? { percent } : {}),
          },
          reply,
        );
        this.progressListeners.get(task.taskId)?.(message);
      },
      delegate: (tag, text, opts) => this.delegate(task.taskId, task.traceId, tag, text, opts),
      ...(this.options.tools ? { tools: this.options.tools(signal) } : {}),
    };
    try {
      const ret = this.options.handler.handle(ctx);
      if (isAsyncIterable(ret)) {
        let streamed = '';
        const iterator = ret[Symbol.asyncIterator]();
        for (;;) {
          const step = await iterator.next();
          if (step.done)
            return {
              ok: true,
              result: toHandlerResult(step.value as string | HandlerResult | void, streamed),
            };
          if (signal.aborted) return { ok: false, code: 'cancelled', message: 'task cancelled' };
          const chunk = String(step.value);
          streamed += chunk;
          onChunk?.(chunk);
        }
      }
      return { ok: true, result: toHandlerResult(await ret, '') };
    } catch (err) {
      if (err instanceof HandlerError) return { ok: false, code: err.code, message: err.message };
      return { ok: false, code: 'handler_error', message: err instanceof Error ? err.message : String(err) };
    }
  }

  private delegate(
    parentTaskId: string,
    traceId: string,
    tag: string,
    text: string,
    opts: { timeoutMs?: number; input?: Record<string, unknown> } = {},
  ): Promise<string> {
    const childId = randomUUID();
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.forgetDelegation(childId);
        reject(new Error(`delegated task ${childId} (${tag}) gave no result in time`));
      }, opts.timeoutMs ?? 60_000);
      timer.unref();
      this.ensureDelegationSubscription();
      this.delegations.set(childId, {
        resolve: (t) => {
          clearTimeout(timer);
          resolve(t);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      const payload: DelegatePayload = {
        parent_task_id: parentTaskId,
        child_task_id: childId,
        agent_id: this.agentId,
        task: text,
        required_capability: tag,
        ...(opts.input ? { input: opts.input } : {}),
      };
      this.emit('amf.task.delegate', parentTaskId, traceId, payload);
    });
  }

  /**
   * Final results are the busiest subject of the mesh: a worker listens to them only while it waits
   * for a delegated task. The subscription is registered before the delegate event is published on
   * the same connection, so no result can arrive unheard.
   */
  private ensureDelegationSubscription(): void {
    this.delegationSub ??= this.bus.subscribe('amf.result.final', (e) =>
      this.onFinalForDelegation(e as AmfEvent<FinalPayload>),
    );
  }

  private forgetDelegation(childId: string): void {
    this.delegations.delete(childId);
    if (this.delegations.size === 0 && this.delegationSub) {
      this.delegationSub.unsubscribe();
      this.delegationSub = undefined;
    }
  }

  private onFinalForDelegation(event: AmfEvent<FinalPayload>): void {
    const waiter = this.delegations.get(event.data.payload.task_id);
    if (!waiter) return;
    this.forgetDelegation(event.data.payload.task_id);
    const p = event.data.payload;
    if (p.status === 'completed' && typeof p.result?.text === 'string') waiter.resolve(p.result.text);
    else
      waiter.reject(
        new HandlerError(p.error?.code ?? 'delegation_failed', p.error?.message ?? 'delegated task failed'),
      );
  }

  private onDeny(event: AmfEvent<PolicyPayload>): void {
    const p = event.data.payload;
    if (!p.terminal || typeof p.task_id !== 'string') return;
    this.inFlight.get(p.task_id)?.controller.abort();
    const waiter = this.delegations.get(p.task_id);
    if (waiter) {
      this.forgetDelegation(p.task_id);
      waiter.reject(new HandlerError(p.reason, p.message));
    }
  }

  /** A cancel from a coordinator (only coordinators may publish it, NATS ACLs) aborts the handler. */
  private onCancel(event: AmfEvent<CancelPayload>): void {
    if (event.amfagentrole !== 'coordinator') return;
    const taskId = event.data.payload.task_id;
    if (typeof taskId === 'string') this.inFlight.get(taskId)?.controller.abort();
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /**
   * Graceful stop: no new claims (queue subscriptions drained), in-flight tasks finish (up to
   * `timeoutMs`, then they are aborted), then a goodbye heartbeat with status offline.
   */
  async drain(timeoutMs = 30_000): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    clearInterval(this.heartbeatTimer);
    await Promise.all(this.subs.map((s) => s.drain().catch(() => undefined)));
    this.heartbeat('draining');
    const all = Promise.all([...this.inFlight.values()].map((f) => f.done));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      all.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) for (const f of this.inFlight.values()) f.controller.abort();
    this.heartbeat('offline');
    await this.bus.flush().catch(() => undefined);
  }
}
