/**
 * A specialist worker on the fabric. For each capability tag it pulls announcements from the work
 * queue (stream AMF_WORK, `workIntake.ts`) as long as it has free slots, runs each through one run
 * path (`run()`, shared with direct A2A/MCP calls), and signs every event it publishes with its agent
 * key. A mesh task's final goes straight to the coordinator and is stored durably when no decision
 * comes back (`resultSubmission.ts`). It also obeys the coordinator's signed orders (cancel, follow-up
 * input, delegation refusals), heartbeats its AgentRecord, and `drain()` stops claiming, lets
 * in-flight tasks finish, then says goodbye.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { createEvent, type EventSender } from '../events/cloudEvent.js';
import type { AgentRecord } from '../events/agentRecord.js';
import type { AmfPayloadMap, ClaimPayload } from '../events/payloads.js';
import { WorkIntake } from './workIntake.js';
import type { AmfEventType } from '../events/eventTypes.js';
import { EventBus } from '../fabric/eventBus.js';
import type { TaskContext } from './handlerApi.js';
import { CANCELLED, invokeHandler, type LocalOutcome } from './invokeHandler.js';
import { TaskSlots } from './taskSlots.js';
import { boundRun, HANDLER_TIMEOUT_CODE, handlerTimeoutMs, RunPauses } from './handlerTimeout.js';
import { DelegationClient } from './delegationClient.js';
import { workerAgentId, workerAgentRecord, workerHeartbeat } from './workerAdvertisement.js';
import { createEphemeralAgentKey, type AgentKey } from '../identity/agentKey.js';
import { signEvent } from '../identity/eventSignature.js';
import { InputWaits } from './inputWaits.js';
import { DeferredClaims } from './deferredClaims.js';
import { HandlerError, type FollowUpMessage } from './handlerApi.js';
import type { MeshWorkerOptions, RunTaskOptions, TaskInput } from './meshWorkerOptions.js';
import { subscribeToOrders } from './coordinatorOrders.js';
import { finalPayload, submitResult, type ResultSubmitter } from './resultSubmission.js';
import { taskEventSubject } from '../fabric/agentUsers.js';
import { AmfError } from '../errors.js';

export type { MeshWorkerOptions, RunTaskOptions, TaskInput };
export { workerAgentId, workerAgentRecord, workerHeartbeat };

export type { LocalOutcome };

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
  /** Mesh tasks' claims held back until they say something else or run past a moment. */
  private readonly claims = new DeferredClaims();
  /** The handler-timeout pauses of the runs in progress, by task id (a wait for input pauses it). */
  private readonly pauses = new Map<string, RunPauses>();
  private readonly pullLoops: Promise<void>[] = [];
  private intake: WorkIntake | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private draining = false;
  /** The operator disabled this agent (coordinatorOrders.ts): it pulls no work until enabled. */
  private disabled = false;
  private stuckSlots = 0;

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
    return new DelegationClient(
      this.bus,
      this.agentId,
      (parentTaskId, traceId, payload) => this.emit('amf.task.delegate', parentTaskId, traceId, payload),
      this.options.log,
    );
  }

  /**
   * Moves the worker onto its own NATS connection before {@link start}: an agent that joins is built
   * (and serves its card and endpoints) on the join connection, and gets its own once admitted.
   */
  useConnection(nc: NatsConnection): void {
    if (this.subs.length > 0 || this.pullLoops.length > 0)
      throw new AmfError('INTERNAL', 'useConnection() must come before start()');
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
      agentId: this.agentId,
      slots: this.slots,
      tagCount: this.options.tags.length,
      draining: () => this.draining,
      paused: () => this.disabled,
      run: (task, options) => this.run(task, options),
    });
    this.intake = intake;
    for (const tag of this.options.tags) this.pullLoops.push(intake.pull(tag));
    this.subs.push(
      ...subscribeToOrders(this.bus, {
        agentId: this.agentId,
        agentKey: this.key.publicKey,
        abort: (taskId) => this.inFlight.get(taskId)?.controller.abort(),
        deliverInput: (taskId, message) => this.inputs.deliver(taskId, message),
        denied: (taskId, reason, message) => this.delegations.denied(taskId, reason, message),
        switched: (disabled) => {
          if (disabled === this.disabled) return;
          this.disabled = disabled;
          this.options.log?.(
            disabled ? 'warn' : 'info',
            disabled
              ? 'disabled by the operator: taking no new work until enabled (`amf agents enable`)'
              : 'enabled by the operator: taking work again',
            { agent_id: this.agentId },
          );
        },
        ...(this.options.coordinatorKey ? { coordinatorKey: this.options.coordinatorKey } : {}),
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

  private heartbeat(
    status: 'active' | 'draining' | 'offline' = this.draining || this.allSlotsStuck ? 'draining' : 'active',
  ): void {
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
    // A held claim goes before anything else the task says; a final carries it (deferredClaims.ts).
    if (type === 'amf.result.final') this.claims.drop(taskId);
    else if (type !== 'amf.task.claim') this.claims.flush(taskId);
    const created = createEvent({
      type,
      sender: this.sender,
      payload,
      taskId,
      traceId,
      ...(confidence !== undefined ? { confidence } : {}),
    });
    const event = signEvent(created, this.key);
    // On its own subject the coordinator of a mesh task records it and copies it to the reply subject.
    if (this.options.ownSubjects)
      this.bus.publish(event, taskEventSubject(this.key.publicKey, reply ? 'mesh' : 'direct'));
    else if (reply) this.bus.publish(event, type, reply);
    else this.bus.publish(event);
  }

  /**
   * The one run path of this worker, whatever brought the task: claims it (`amf.task.claim`; a mesh
   * task's claim is held back a moment, and left to its final if that comes first), waits for a slot, runs the handler with progress, partial and final events on the canonical subjects
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
    const claim = () => this.claim(task, options);
    if (options.origin === 'mesh') this.claims.hold(task.taskId, claim);
    else claim();
    // The slot bounds handler runs only: storing a mesh result (which may wait out a NATS outage)
    // happens after the slot is free, but the task stays in flight (drain waits) until it is stored.
    // A handler stuck past its timeout keeps its slot until it settles (handlerTimeout.ts).
    let storing: Promise<void> = Promise.resolve();
    const done = this.slots
      .acquire()
      .then(async (release) => {
        let stuck: Promise<unknown> | undefined;
        try {
          return await this.execute(
            task,
            controller,
            options,
            (stored) => (storing = stored),
            (running) => (stuck = running),
          );
        } finally {
          if (stuck) void this.holdStuckSlot(task, stuck, release);
          else release();
        }
      })
      .then(async (outcome) => {
        await storing;
        return outcome;
      })
      .finally(() => {
        this.claims.drop(task.taskId);
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
    onStuck: (running: Promise<unknown>) => void,
  ): Promise<LocalOutcome> {
    const { signal } = controller;
    // Aborted while waiting for a slot: the handler never starts.
    if (signal.aborted && options.origin === 'mesh') return CANCELLED;
    let outcome: LocalOutcome = CANCELLED;
    let timedOut = false;
    if (!signal.aborted) {
      const limitMs = handlerTimeoutMs(this.options.handlerTimeouts, task.tag);
      // Waits for the requester's input do not count against the handler's timeout (RunPauses).
      const pauses = new RunPauses();
      this.pauses.set(task.taskId, pauses);
      const run = await boundRun(
        this.invoke(task, signal, options),
        limitMs,
        () => controller.abort(),
        pauses,
      ).finally(() => this.pauses.delete(task.taskId));
      if (run.kind === 'settled') outcome = run.value;
      else {
        timedOut = true;
        outcome = {
          ok: false,
          code: HANDLER_TIMEOUT_CODE,
          message: `the handler did not finish task ${task.taskId} within ${Math.round(limitMs / 1000)} s`,
        };
        this.options.log?.(
          'warn',
          `handler ${this.options.handler.name} ran past its timeout (${Math.round(limitMs / 1000)} s) on task ${task.taskId}${run.stuck ? ' and ignores its abort signal: its slot stays taken until it ends' : ''}`,
          { task_id: task.taskId, tag: task.tag },
        );
        if (run.stuck) onStuck(run.running);
      }
    }
    if (signal.aborted && !timedOut) {
      // Mesh task: the coordinator already ended it. Direct task: this final is its one ending.
      if (options.origin === 'mesh') return CANCELLED;
      outcome = CANCELLED;
    }
    const payload = finalPayload(task.taskId, this.agentId, outcome, options.offer);
    const confidence = outcome.ok ? outcome.result.confidence : 0;
    if (options.origin === 'mesh') {
      // The final names the offer it came with: it is the claim too, when none has left yet.
      this.claims.drop(task.taskId);
      onStoring(submitResult(this.submitter(), task, payload, confidence));
    } else this.emit('amf.result.final', task.taskId, task.traceId, payload, undefined, confidence);
    return outcome;
  }

  /**
   * Keeps a stuck handler's slot until the handler settles. While every slot is stuck the worker
   * claims nothing (it has no free slot to pull with) and its heartbeat says `draining`, so the
   * coordinator offers its tags' tasks elsewhere; it is `active` again once a slot comes back.
   */
  private async holdStuckSlot(
    task: TaskInput,
    running: Promise<unknown>,
    release: () => void,
  ): Promise<void> {
    this.stuckSlots++;
    if (this.allSlotsStuck) {
      this.options.log?.(
        'error',
        `every slot of worker ${this.options.name} (${this.slots.capacity}) is held by a handler that ran past its timeout and ignores its abort signal: claiming nothing until one ends`,
        { task_id: task.taskId },
      );
      this.heartbeat();
    }
    try {
      await running;
    } finally {
      const wasAllStuck = this.allSlotsStuck;
      this.stuckSlots--;
      release();
      this.options.log?.(
        'info',
        `a handler stuck past its timeout ended (task ${task.taskId}); its slot is free`,
        {
          task_id: task.taskId,
        },
      );
      if (wasAllStuck) this.heartbeat();
    }
  }

  /** True when every slot is held by a handler stuck past its timeout. */
  private get allSlotsStuck(): boolean {
    return this.stuckSlots >= this.slots.capacity;
  }

  /** Slots held by handlers that ran past their timeout and did not stop when aborted. */
  get stuckCount(): number {
    return this.stuckSlots;
  }

  /** What the result submission needs of this worker (its connection may change before start). */
  private submitter(): ResultSubmitter {
    return {
      bus: this.bus,
      sender: this.sender,
      key: this.key,
      agentId: this.agentId,
      name: this.options.name,
      ownSubjects: this.options.ownSubjects === true,
      log: this.options.log,
      progress: (task, message) =>
        this.emit('amf.task.progress', task.taskId, task.traceId, {
          task_id: task.taskId,
          agent_id: this.agentId,
          message,
        }),
    };
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
      delegate: (tag, text, opts = {}) => {
        // The delegation is progress of this task: its claim must be on record first.
        this.claims.flush(task.taskId);
        return this.delegations.delegate({
          parentTaskId: task.taskId,
          traceId: task.traceId,
          tag,
          text,
          ...opts,
        });
      },
      requestInput: (prompt) => this.requestInput(task, signal, options, String(prompt).slice(0, 4000)),
      ...(this.options.tools ? { tools: this.options.tools(signal) } : {}),
    };
    return invokeHandler(
      this.options.handler,
      ctx,
      (delta) => {
        this.emit(
          'amf.result.partial',
          task.taskId,
          task.traceId,
          { task_id: task.taskId, agent_id: this.agentId, seq: seq++, delta },
          reply,
        );
        options.onChunk?.(delta);
      },
      this.options.log,
    );
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
    const resume = this.pauses.get(task.taskId)?.pause();
    const reason = prompt || 'input required';
    const payload = { task_id: task.taskId, agent_id: this.agentId, reason };
    this.emit('amf.task.blocked', task.taskId, task.traceId, payload, options.replySubject);
    options.onInputRequired?.(reason);
    const message = await waiting.finally(() => resume?.());
    this.claim(task, options);
    return message;
  }

  /** Sends the claim of `task` now (its first, or again when its input came). */
  private claim(task: TaskInput, options: RunTaskOptions): void {
    this.emit(
      'amf.task.claim',
      task.taskId,
      task.traceId,
      claimPayload(task, this.agentId, options),
      options.replySubject,
    );
  }

  /** Hands a direct task's follow-up to its waiting handler; false when it waits for nothing. */
  provideInput(taskId: string, message: FollowUpMessage): boolean {
    return this.inputs.deliver(taskId, message);
  }

  /** True while `taskId`'s handler waits for input. */
  awaitsInput(taskId: string): boolean {
    return this.inputs.isWaiting(taskId);
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

/**
 * The claim of a task: a mesh task's names the offer it came with; a direct task's names none, so it
 * can never count as the claim of a mesh task that has the same id
 * (coordinator/tasks/offerNonce.ts).
 */
function claimPayload(task: TaskInput, agentId: string, options: RunTaskOptions): ClaimPayload {
  return {
    task_id: task.taskId,
    agent_id: agentId,
    required_capability: task.tag,
    attempt: task.attempt,
    ...(options.origin === 'mesh' && options.offer !== undefined ? { offer: options.offer } : {}),
  };
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
