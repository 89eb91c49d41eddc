/**
 * A specialist worker on the fabric: joins the queue group `workers.<tag>` for each tag, claims what
 * NATS hands it, runs the handler, and publishes claim, progress, partial and final events to the
 * canonical subject and to the task's reply subject. Heartbeats carry its AgentRecord. `drain()`
 * stops claiming, lets in-flight tasks finish, then says goodbye.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { createEvent, type AmfEventOf, type EventSender } from '../events/cloudEvent.js';
import type { LogFn } from '../log.js';
import type { AgentRecord } from '../events/agentRecord.js';
import type { AmfPayloadMap, FinalPayload, ResultArtifactPayload } from '../events/payloads.js';
import { finalSubject, resultSubject } from '../events/subjects.js';
import { WorkIntake } from './workIntake.js';
import type { AmfEventType } from '../events/eventTypes.js';
import { EventBus } from '../fabric/eventBus.js';
import type { ResultArtifact, TaskContext, TaskTools, WorkerHandler } from './handlerApi.js';
import { CANCELLED, invokeHandler, type LocalOutcome } from './invokeHandler.js';
import { TaskSlots } from './taskSlots.js';
import { DelegationClient } from './delegationClient.js';
import { workerAgentId, workerAgentRecord, workerHeartbeat } from './workerAdvertisement.js';
import { createEphemeralAgentKey, type AgentKey } from '../identity/agentKey.js';
import { signEvent } from '../identity/eventSignature.js';
import { InputWaits } from './inputWaits.js';
import { HandlerError, type FollowUpMessage } from './handlerApi.js';

export { workerAgentId, workerAgentRecord, workerHeartbeat };

export type { LocalOutcome };

/**
 * How long a worker waits for its coordinator's decision on a final sent straight to it before it
 * stores the final durably instead (a coordinator answers in well under a millisecond when alive).
 */
const DIRECT_FINAL_TIMEOUT_MS = 3_000;
const decoder = new TextDecoder();

/** True when the coordinator's answer is a decision (accepted or refused): nothing left to store. */
function isFinalDecision(answer: Uint8Array | undefined): boolean {
  if (!answer) return false;
  try {
    const decision = (JSON.parse(decoder.decode(answer)) as { decision?: unknown }).decision;
    return decision === 'accepted' || decision === 'refused';
  } catch {
    return false;
  }
}

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
  /** The agent id (under SPIFFE: the SVID's SPIFFE ID); default `spiffe://<trust>/worker/<name>`. */
  agentId?: string;
  /** Advertised visibility (default local; mesh/public need a proven SPIFFE SVID at admission). */
  visibility?: 'local' | 'mesh' | 'public';
  mcpEndpoint?: string;
  /** Gives each task its `ctx.tools` (the worker's MCP servers), bound to the task's signal. */
  tools?: (signal: AbortSignal) => TaskTools;
  log?: LogFn;
  /**
   * The agent's own key: advertised as `nkey` and signing every event this worker sends, so the
   * coordinator accepts them only as this agent's (default: a key for this process only).
   */
  key?: AgentKey;
  /**
   * Where heartbeats go when not on the main connection: the join connection of an agent that
   * connects as its own NATS user. Its user exists only while the agent is admitted, so its
   * heartbeats must travel on a connection that outlives a revocation (or a restarted server) to
   * get it admitted again.
   */
  heartbeatConnection?: NatsConnection;
}

/** A task as it reaches the worker; the worker adds the signal, progress, delegate, tools and input. */
export type TaskInput = Omit<TaskContext, 'signal' | 'progress' | 'delegate' | 'tools' | 'requestInput'>;

/** How one task is run: every way a task arrives goes through `MeshWorker.run` with these. */
export interface RunTaskOptions {
  /**
   * `mesh`: announced by a coordinator, which ends the task itself when it is cancelled or expires.
   * `direct`: A2A, `POST /tasks/send` or an MCP tool call; this worker publishes its one ending.
   */
  origin: 'mesh' | 'direct';
  /** The caller's cancellation (client gone, A2A cancel, MCP request aborted). */
  signal?: AbortSignal;
  /** The coordinator's reply subject for this task (mesh tasks only, already checked). */
  replySubject?: string;
  /** Receives each streamed chunk (also published as `amf.result.partial`). */
  onChunk?: (delta: string) => void;
  /** Receives each progress message (also published as `amf.task.progress`). */
  onProgress?: (message: string) => void;
  /**
   * The handler asked for input (`ctx.requestInput`): a direct task's caller shows it (A2A
   * input-required) and delivers the follow-up with `MeshWorker.provideInput`. Without it a direct
   * task cannot take input; mesh tasks get theirs from the coordinator (`amf.task.input`).
   */
  onInputRequired?: (prompt: string) => void;
}

interface InFlight {
  controller: AbortController;
  done: Promise<LocalOutcome>;
  onProgress: ((message: string) => void) | undefined;
}

/** The NATS side of a worker. */
export class MeshWorker {
  readonly agentId: string;
  /** The key this worker's events are signed with; its public half is the agent's `nkey`. */
  readonly key: AgentKey;
  private bus: EventBus;
  private readonly heartbeatBus: EventBus;
  private readonly sender: EventSender;
  private readonly subs: Subscription[] = [];
  private readonly inFlight = new Map<string, InFlight>();
  private readonly slots: TaskSlots;
  private delegations: DelegationClient;
  private readonly inputs = new InputWaits();
  private readonly pullLoops: Promise<void>[] = [];
  private intake: WorkIntake | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private draining = false;

  constructor(
    nc: NatsConnection,
    private readonly options: MeshWorkerOptions,
  ) {
    this.bus = new EventBus(nc);
    this.heartbeatBus = options.heartbeatConnection ? new EventBus(options.heartbeatConnection) : this.bus;
    this.agentId = workerAgentId(options);
    this.key = options.key ?? createEphemeralAgentKey();
    this.sender = {
      identity: this.agentId,
      source: options.endpoint,
      role: 'specialist',
      trustDomain: options.trustDomain,
    };
    this.slots = new TaskSlots(options.concurrency);
    this.delegations = this.delegationClient();
  }

  private delegationClient(): DelegationClient {
    return new DelegationClient(this.bus, this.agentId, (parentTaskId, traceId, payload) =>
      this.emit('amf.task.delegate', parentTaskId, traceId, payload),
    );
  }

  /**
   * Moves the worker onto its own NATS connection before {@link start}: an agent that joins is built
   * (and serves its card and endpoints) on the join connection, and gets its own once admitted.
   */
  useConnection(nc: NatsConnection): void {
    if (this.subs.length > 0 || this.pullLoops.length > 0)
      throw new Error('useConnection() must come before start()');
    this.bus = new EventBus(nc);
    this.delegations = this.delegationClient();
  }

  /** The advertisement this worker publishes with every heartbeat. */
  agentRecord(status: 'active' | 'draining' | 'offline' = 'active'): AgentRecord {
    return workerAgentRecord(this.options, this.key, status);
  }

  /** Starts pulling each tag's work queue, listens for cancellations and starts heartbeating. */
  async start(): Promise<void> {
    const intake = new WorkIntake({
      nc: this.bus.nc,
      slots: this.slots,
      tagCount: this.options.tags.length,
      draining: () => this.draining,
      run: (task, options) => this.run(task, options),
    });
    this.intake = intake;
    for (const tag of this.options.tags) this.pullLoops.push(intake.pull(tag));
    // Cancellations arrive on the public fabric (specialists cannot read amf.internal.>); delegation
    // results too, but that subscription exists only while delegations are pending (see delegate()).
    this.subs.push(
      this.bus.subscribe('amf.policy.deny', (e) => {
        if (e.type === 'amf.policy.deny') this.onDeny(e);
      }),
    );
    this.subs.push(
      this.bus.subscribe('amf.task.cancel', (e) => {
        if (e.type === 'amf.task.cancel') this.onCancel(e);
      }),
    );
    this.subs.push(
      this.bus.subscribe('amf.task.input', (e) => {
        if (e.type === 'amf.task.input') this.onInput(e);
      }),
    );
    this.heartbeat();
    this.heartbeatTimer = setInterval(() => this.heartbeat(), this.options.heartbeatSeconds * 1000);
    this.heartbeatTimer.unref();
    this.heartbeatOnReconnect();
    await this.bus.flush();
  }

  /**
   * The coordinator may have marked this worker offline during a NATS outage: say we are here as
   * soon as the connection is back, not a heartbeat interval later. Pull requests sent before the
   * outage may be unknown to the server now: they are asked for afresh.
   */
  private heartbeatOnReconnect(): void {
    void (async () => {
      for await (const status of this.bus.nc.status()) {
        if (status.type !== 'reconnect' || this.draining) continue;
        this.heartbeat();
        this.intake?.reconnected();
      }
    })().catch(() => undefined);
  }

  private heartbeat(status: 'active' | 'draining' | 'offline' = this.draining ? 'draining' : 'active'): void {
    try {
      this.heartbeatBus.publish(workerHeartbeat(this.options, this.key, status));
    } catch (err) {
      // Called from a timer: a closed connection must not throw out of it and crash the process.
      this.options.log?.('warn', 'heartbeat not sent', {
        err: err instanceof Error ? err.message : String(err),
      });
    }
  }

  private emit<T extends AmfEventType>(
    type: T,
    taskId: string,
    traceId: string,
    payload: AmfPayloadMap[T],
    reply?: string,
    confidence?: number,
  ): void {
    const created = createEvent({
      type,
      sender: this.sender,
      payload,
      taskId,
      traceId,
      ...(confidence !== undefined ? { confidence } : {}),
    });
    const event = signEvent(created, this.key);
    if (reply) this.bus.publish(event, type, reply);
    else this.bus.publish(event);
  }

  /**
   * The one run path of this worker, whatever brought the task: claims it (`amf.task.claim`), waits
   * for a slot, runs the handler with progress, partial and final events on the canonical subjects
   * (and the reply subject, for mesh tasks), and tracks it for cancellation and drain. Never rejects.
   * A draining worker takes nothing new; a mesh task is then left for the TTL to bring elsewhere.
   */
  async run(task: TaskInput, options: RunTaskOptions): Promise<LocalOutcome> {
    if (this.draining || this.inFlight.has(task.taskId)) {
      return this.draining
        ? { ok: false, code: 'draining', message: `worker ${this.options.name} is draining` }
        : { ok: false, code: 'duplicate_task', message: `task ${task.taskId} is already running here` };
    }
    const controller = new AbortController();
    const { signal } = options;
    const onCallerAbort = () => controller.abort();
    if (signal?.aborted) controller.abort();
    else signal?.addEventListener('abort', onCallerAbort, { once: true });
    this.emit(
      'amf.task.claim',
      task.taskId,
      task.traceId,
      { task_id: task.taskId, agent_id: this.agentId, required_capability: task.tag, attempt: task.attempt },
      options.replySubject,
    );
    // The slot bounds handler runs only: storing a mesh result (which may wait out a NATS outage)
    // happens after the slot is free, but the task stays in flight (drain waits) until it is stored.
    let storing: Promise<void> = Promise.resolve();
    const done = this.slots
      .run(() => this.execute(task, controller, options, (stored) => (storing = stored)))
      .then(async (outcome) => {
        await storing;
        return outcome;
      })
      .finally(() => {
        this.inFlight.delete(task.taskId);
        signal?.removeEventListener('abort', onCallerAbort);
      });
    this.inFlight.set(task.taskId, { controller, done, onProgress: options.onProgress });
    return done;
  }

  private async execute(
    task: TaskInput,
    controller: AbortController,
    options: RunTaskOptions,
    onStoring: (stored: Promise<void>) => void,
  ): Promise<LocalOutcome> {
    const { signal } = controller;
    // Aborted while waiting for a slot: the handler never starts.
    let outcome = signal.aborted ? CANCELLED : await this.invoke(task, signal, options);
    if (signal.aborted) {
      // Mesh task: the coordinator already ended it. Direct task: this final is its one ending.
      if (options.origin === 'mesh') return CANCELLED;
      outcome = CANCELLED;
    }
    const payload: FinalPayload = outcome.ok
      ? {
          task_id: task.taskId,
          agent_id: this.agentId,
          status: 'completed',
          result: {
            text: outcome.result.text,
            ...(outcome.result.data ? { data: outcome.result.data } : {}),
            ...(outcome.result.artifacts ? { artifacts: toArtifactPayloads(outcome.result.artifacts) } : {}),
            ...(outcome.result.respondWith === 'message' ? { respond_with: 'message' as const } : {}),
          },
          ...(outcome.result.usage ? { usage: outcome.result.usage } : {}),
        }
      : {
          task_id: task.taskId,
          agent_id: this.agentId,
          status: 'failed',
          error: { code: outcome.code, message: outcome.message },
        };
    const confidence = outcome.ok ? outcome.result.confidence : 0;
    if (options.origin === 'mesh') onStoring(this.submitResult(task, payload, confidence));
    else this.emit('amf.result.final', task.taskId, task.traceId, payload, undefined, confidence);
    return outcome;
  }

  /**
   * A mesh task's final never goes onto `amf.result.final` from here: the coordinator that accepts it
   * (the task is still open and claimed by this worker) publishes the one canonical final, so a stale
   * worker's late answer can never become a second terminal event. It is first sent straight to the
   * task's coordinator (request/reply); only when no decision comes back (coordinator gone, NATS
   * down) is it stored in the durable results stream, retried across NATS outages until stored
   * (docs/reliability.md). The work-queue message is acknowledged only after either.
   */
  private async submitResult(task: TaskInput, payload: FinalPayload, confidence?: number): Promise<void> {
    // One signature, in the split form of finals: the coordinator that relays the result carries it
    // over, so the answer stays verifiable as this worker's (identity/eventSignature.ts).
    const finalEvent = (final: FinalPayload, conf?: number) =>
      signEvent(
        createEvent({
          type: 'amf.result.final',
          sender: this.sender,
          payload: final,
          taskId: task.taskId,
          traceId: task.traceId,
          ...(conf !== undefined ? { confidence: conf } : {}),
        }),
        this.key,
      );
    const answer = await this.bus.request(
      finalEvent(payload, confidence),
      finalSubject(task.taskId),
      DIRECT_FINAL_TIMEOUT_MS,
    );
    if (isFinalDecision(answer)) return;
    const store = (final: FinalPayload, conf?: number) =>
      this.bus.publishDurable(finalEvent(final, conf), resultSubject(task.taskId), {
        msgId: `${task.taskId}.${task.attempt}.${this.options.name}`,
        onRetry: (err) => {
          this.options.log?.('warn', 'result not stored yet; retrying', {
            task_id: task.taskId,
            err: String(err),
          });
          // A sign of life for the coordinator's watchdog: the work is done, only storing waits.
          this.emit('amf.task.progress', task.taskId, task.traceId, {
            task_id: task.taskId,
            agent_id: this.agentId,
            message: 'result not stored yet; retrying',
          });
        },
      });
    let outcome = await store(payload, confidence);
    if (outcome === 'too_large')
      // The answer cannot travel: the task still ends, as a failure that says why.
      outcome = await store(
        {
          task_id: task.taskId,
          agent_id: this.agentId,
          status: 'failed',
          error: {
            code: 'result_too_large',
            message: 'the result is larger than the fabric carries (NATS max_payload)',
          },
        },
        0,
      );
    if (outcome !== 'stored')
      this.options.log?.(
        'error',
        'result could not be stored; the coordinator will retry or expire the task',
        {
          task_id: task.taskId,
        },
      );
  }

  /** Builds the handler's context (progress, delegate, tools bound to this task) and runs it. */
  private invoke(task: TaskInput, signal: AbortSignal, options: RunTaskOptions): Promise<LocalOutcome> {
    const reply = options.replySubject;
    let seq = 0;
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
        options.onProgress?.(message);
      },
      delegate: (tag, text, opts = {}) =>
        this.delegations.delegate({ parentTaskId: task.taskId, traceId: task.traceId, tag, text, ...opts }),
      requestInput: (prompt) => this.requestInput(task, signal, options, String(prompt).slice(0, 4000)),
      ...(this.options.tools ? { tools: this.options.tools(signal) } : {}),
    };
    return invokeHandler(this.options.handler, ctx, (delta) => {
      this.emit(
        'amf.result.partial',
        task.taskId,
        task.traceId,
        { task_id: task.taskId, agent_id: this.agentId, seq: seq++, delta },
        reply,
      );
      options.onChunk?.(delta);
    });
  }

  /**
   * A handler's `ctx.requestInput`: the wait starts before `amf.task.blocked` leaves, so a follow-up
   * sent as soon as the requester sees it is not missed. With the input, the worker claims the task
   * again (the lifecycle moves it from blocked back to claimed) and the handler goes on.
   */
  private async requestInput(
    task: TaskInput,
    signal: AbortSignal,
    options: RunTaskOptions,
    prompt: string,
  ): Promise<FollowUpMessage> {
    if (options.origin === 'direct' && !options.onInputRequired)
      throw new HandlerError(
        'input_not_supported',
        'this task came through a protocol that cannot send input',
      );
    const waiting = this.inputs.wait(task.taskId, signal);
    const reason = prompt || 'input required';
    const payload = { task_id: task.taskId, agent_id: this.agentId, reason };
    this.emit('amf.task.blocked', task.taskId, task.traceId, payload, options.replySubject);
    options.onInputRequired?.(reason);
    const message = await waiting;
    this.emit(
      'amf.task.claim',
      task.taskId,
      task.traceId,
      { task_id: task.taskId, agent_id: this.agentId, required_capability: task.tag, attempt: task.attempt },
      options.replySubject,
    );
    return message;
  }

  /** Hands a direct task's follow-up to its waiting handler; false when it waits for nothing. */
  provideInput(taskId: string, message: FollowUpMessage): boolean {
    return this.inputs.deliver(taskId, message);
  }

  /** True while `taskId`'s handler waits for input. */
  awaitsInput(taskId: string): boolean {
    return this.inputs.isWaiting(taskId);
  }

  /** A follow-up from a coordinator (only coordinators may publish it, NATS ACLs) for a task held here. */
  private onInput(event: AmfEventOf<'amf.task.input'>): void {
    if (event.amfagentrole !== 'coordinator') return;
    const p = event.data.payload;
    if (p.agent_id !== this.agentId || typeof p.task_id !== 'string' || typeof p.text !== 'string') return;
    const data = typeof p.data === 'object' && p.data !== null && !Array.isArray(p.data) ? p.data : undefined;
    this.inputs.deliver(p.task_id, {
      text: p.text,
      ...(data ? { data } : {}),
      ...(typeof p.message_id === 'string' ? { messageId: p.message_id } : {}),
    });
  }

  private onDeny(event: AmfEventOf<'amf.policy.deny'>): void {
    // Only a coordinator ends tasks (NATS ACLs keep others from publishing policy events; this is the second line).
    if (event.amfagentrole !== 'coordinator') return;
    const p = event.data.payload;
    if (!p.terminal || typeof p.task_id !== 'string') return;
    this.inFlight.get(p.task_id)?.controller.abort();
    this.delegations.denied(p.task_id, p.reason, p.message);
  }

  /** A cancel from a coordinator (only coordinators may publish it, NATS ACLs) aborts the handler. */
  private onCancel(event: AmfEventOf<'amf.task.cancel'>): void {
    if (event.amfagentrole !== 'coordinator') return;
    const { task_id: taskId, agent_id: agentId } = event.data.payload;
    // A cancel naming an agent (the claimant, or a claim that lost) is for that agent only.
    if (agentId !== undefined && agentId !== this.agentId) return;
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
    // Bounded like the flush below: an unsubscribe waits for the server, which may be unreachable.
    await within(Promise.all(this.subs.map((s) => s.drain().catch(() => undefined))), 2_000);
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
    // The pull loops end once they see the drain (within one pull wait): nothing is taken after this.
    await Promise.all(this.pullLoops);
    this.heartbeat('offline');
    // Bounded: while NATS is unreachable a flush would wait for the reconnect, however long.
    await within(Promise.all([this.bus.flush(), this.heartbeatBus.flush()]), 2_000);
  }
}

/** A handler's artifacts as they travel in a final result (plain JSON, at most 32). */
function toArtifactPayloads(artifacts: readonly ResultArtifact[]): ResultArtifactPayload[] {
  return artifacts.slice(0, 32).map((a) => ({
    ...(a.name !== undefined ? { name: String(a.name) } : {}),
    ...(a.description !== undefined ? { description: String(a.description) } : {}),
    parts: (Array.isArray(a.parts) ? a.parts : []).map((p) => ({ ...p }) as Record<string, unknown>),
  }));
}

/** Waits for `work` (its failure ignored) or `ms`, whichever comes first. */
async function within(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work.catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}
