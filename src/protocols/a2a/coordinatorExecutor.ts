/**
 * The coordinator as an A2A agent: each A2A task becomes one mesh task, dispatched through the
 * task service like an OpenAI request, and its A2A state follows the AMF lifecycle —
 * announced → submitted, claimed/progress → working, blocked → input-required, final → completed
 * (or a Message, when the handler answers with one), failed/expired → failed (rejected when the
 * handler rejected it), cancel → canceled. A follow-up message to an input-required task goes to the
 * worker holding it (`amf.task.input`). The A2A `contextId` is the mesh trace (`amftraceid`): one
 * conversation, one trace, and one agent: a new message of a known conversation goes to the tag its
 * last task went to (taskRouting.ts). A cancel reaches the worker as `amf.task.cancel` (the
 * lifecycle). The mesh may take `requestTimeoutMs` per message; an input-required task waits
 * `inputTtlMs` for the client's next one (taskDeadline.ts).
 */
import { randomUUID } from 'node:crypto';
import { Role, Task, TaskState, type Message, type SendMessageRequest } from '@a2a-js/sdk';
import {
  AgentEvent,
  ServerCallContext,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type TaskStore,
} from '@a2a-js/sdk/server';
import { RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import type { TaskResult, TaskService, TaskUpdate } from '../../coordinator/tasks/taskService.js';
import { toAmfError } from '../../errors.js';
import { REJECTED_CODE } from '../../worker/handlerApi.js';
import type { A2aExtension } from './a2aExtension.js';
import { STREAMING_KEY } from './a2aServer.js';
import { DIRECT_ANSWER_KEY, type DirectAnswer } from './lightSendMessage.js';
import { persistTaskEvents } from './taskPersistence.js';
import { messageInput, resultArtifact, traceIdForContext, UUID_PATTERN } from './messageParts.js';
import { routeA2aMessage, type A2aRoute, type RoutingOptions } from './taskRouting.js';
import { MAX_TIMER_MS, TaskDeadline } from './taskDeadline.js';
import { handlerArtifacts, TaskSession } from './taskSession.js';
import type { WaitingTask, WaitingTasks } from './waitingTasks.js';
import type { LogFn } from '../../log.js';

/** ServerCallContext.state key of the route chosen at admission. */
const ROUTE_KEY = 'amf.a2a.route';
/** The context of the executor's own store reads and writes (no request's: one scope for all callers). */
const OWN_CONTEXT = new ServerCallContext();
/** How often a taken-over task looks whether its worker is back on NATS. */
const HEARD_AGAIN_POLL_MS = 200;
/** Conversations whose agent is remembered: this many at most, half of them at least. */
const CONTEXTS_REMEMBERED = 10_000;
export interface CoordinatorExecutorOptions {
  /** The A2A task store, kept current by the executor for the task's whole life. */
  store: TaskStore;
  /** The mesh's tasks: submitted, followed, given input, cancelled, kept while they wait for input. */
  tasks: Pick<
    TaskService,
    'submit' | 'follow' | 'abandon' | 'get' | 'cancel' | 'sendInput' | 'keepWhileWaiting' | 'adoptWaiting'
  >;
  agents: AgentDirectory;
  /** How long the mesh may take to answer one message (the task fails after it). */
  requestTimeoutMs: number;
  /** How long an input-required task waits for the client's next message (`a2a.input_ttl_seconds`). */
  inputTtlMs: number;
  /** `a2a.default_agent`: where a message nothing else routes goes. */
  defaultAgent?: string | null;
  /** Extensions whose requests messages may carry (AMP), routed before intents and skills. */
  extensions?: readonly A2aExtension[];
  /** Told of each message no capability could be found for (the console shows these refusals). */
  onUnrouted?: (requested: string, message: string) => void;
  log?: LogFn;
  /** Who keeps the tasks waiting for input: this coordinator's host and data dir (WaitingTask.owner). */
  owner?: string;
  /**
   * Aborted when the coordinator's edge stops: every task still working ends on its client's stream
   * with a final `failed` status saying so, rather than a cut connection.
   */
  stopping?: AbortSignal;
}

/** What a client whose task was still working reads when the coordinator stops. */
const STOPPING_MESSAGE =
  'the coordinator is stopping: the task ended before its answer; send it again once the coordinator is back';

/** What an unroutable message asked for, as a person would name it. */
function requestedBy(params: SendMessageRequest): string {
  const meta = (m: unknown, key: string): unknown => (m as Record<string, unknown> | undefined)?.[key];
  const tag = meta(params.message?.metadata, 'tag') ?? meta(params.metadata, 'tag');
  if (typeof tag === 'string') return `tag ${tag}`;
  const intent = meta(params.message?.metadata, 'intent') ?? meta(params.metadata, 'intent');
  if (typeof intent === 'string') return `intent "${intent.slice(0, 80)}"`;
  return 'a message without a tag';
}

interface Running {
  session: TaskSession;
  /** The client no longer waits for the mesh's answer (cancel, deadline, stop): see release(). */
  released?: boolean;
  meshTaskId?: string;
  /** Why the client stopped waiting (a deadline ran out), once it did. */
  expired?: string;
  /** Its input-required state is kept in the waiting-tasks bucket. */
  kept?: boolean;
}

/** A task an earlier run of the coordinator left waiting for input, taken over here. */
interface Restored {
  waiting: WaitingTask;
  timer: NodeJS.Timeout;
}

function now(): string {
  return new Date().toISOString();
}

/** A status message of the agent's. */
function agentText(contextId: string, taskId: string, text: string): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [
      { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export class CoordinatorExecutor implements AgentExecutor {
  private readonly running = new Map<string, Running>();
  /**
   * The tag each recent conversation (contextId) went to last, in two generations: a full one
   * becomes the older and the older is forgotten whole. Dropping the oldest entry of one Map at each
   * message would cost a scan over the holes the drops before it left.
   */
  private contexts = new Map<string, string>();
  private olderContexts = new Map<string, string>();
  private readonly routing: RoutingOptions;
  /** Tasks taken over from an earlier run, until their client's next message (or their input TTL). */
  private readonly restored = new Map<string, Restored>();
  /** Where tasks waiting for input are kept across a restart (restoreWaiting); none: not kept. */
  private waiting: Pick<WaitingTasks, 'put' | 'remove' | 'all'> | undefined;

  /** Who keeps this coordinator's waiting tasks (CoordinatorExecutorOptions.owner). */
  private get owner(): string {
    return this.opts.owner ?? '';
  }

  /** When restoreWaiting took the waiting tasks over (an agent heard after it is back on NATS). */
  private restoredAt = 0;

  constructor(private readonly opts: CoordinatorExecutorOptions) {
    this.routing = {
      defaultAgent: opts.defaultAgent ?? null,
      contextTag: (contextId) => this.contexts.get(contextId) ?? this.olderContexts.get(contextId),
      ...(opts.extensions ? { extensions: opts.extensions } : {}),
    };
    opts.stopping?.addEventListener('abort', () => this.endOnStop(), { once: true });
  }

  /**
   * The coordinator stops: each task still working gets its final `failed` status (code
   * UNAVAILABLE) on its bus, which the SDK sends on every stream of it (`message/stream`,
   * `tasks/resubscribe`) before it closes them, and returns to a blocking `message/send`. A task
   * waiting for input is left as it is: the next run takes it over.
   */
  private endOnStop(): void {
    for (const entry of this.running.values()) {
      const { session } = entry;
      if (session.cancelled || session.isAwaitingInput || entry.kept) continue;
      session.status(TaskState.TASK_STATE_FAILED, STOPPING_MESSAGE, {
        code: 'UNAVAILABLE',
        reason: 'coordinator_stopping',
      });
      // Nothing more goes on it: the wait released next ends in runToEnd without a second status.
      session.cancelled = true;
      this.release(entry);
    }
  }

  /**
   * Ends the wait for the mesh's answer to `entry` (the dispatcher's `abandon`, which cancels the
   * mesh task if it still runs), as a request's AbortSignal would, without one per request.
   */
  private release(entry: Running): void {
    entry.released = true;
    if (entry.meshTaskId) this.opts.tasks.abandon(entry.meshTaskId);
  }

  private rememberContext(contextId: string, tag: string): void {
    this.contexts.set(contextId, tag);
    if (this.contexts.size < CONTEXTS_REMEMBERED / 2) return;
    this.olderContexts = this.contexts;
    this.contexts = new Map();
  }

  /** Admission check (before the SDK creates a task): routes the message or throws an A2A error. */
  admit(params: SendMessageRequest, context: ServerCallContext): void {
    try {
      context.state.set(ROUTE_KEY, routeA2aMessage(params, this.opts.agents, this.routing));
    } catch (err) {
      if (err instanceof RequestMalformedError) this.opts.onUnrouted?.(requestedBy(params), err.message);
      throw err;
    }
  }

  /** True when `a2aTaskId` runs here and waits for the requester's next message. */
  awaitsInput(a2aTaskId: string): boolean {
    return this.running.get(a2aTaskId)?.session.isAwaitingInput === true || this.restored.has(a2aTaskId);
  }

  /** The mesh task behind an A2A task while it runs (for tests and diagnostics). */
  meshTaskOf(a2aTaskId: string): string | undefined {
    return this.running.get(a2aTaskId)?.meshTaskId;
  }

  execute = async (rc: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const { taskId, contextId } = rc;
    const existing = this.running.get(taskId);
    if (existing) {
      // A follow-up message to a task waiting for input (AmfRequestHandler admitted it).
      const input = messageInput(rc.userMessage);
      await existing.session.followUp({ ...input, messageId: rc.userMessage.messageId });
      return;
    }
    const restored = this.restored.get(taskId);
    if (restored) {
      this.restored.delete(taskId);
      clearTimeout(restored.timer);
      return this.resume(rc, bus, restored.waiting);
    }
    const route =
      (rc.context.state.get(ROUTE_KEY) as A2aRoute | undefined) ??
      routeA2aMessage(rc.request, this.opts.agents, this.routing);
    this.rememberContext(contextId, route.tag);
    const traceId = traceIdForContext(contextId);
    const streaming = rc.context.state.get(STREAMING_KEY) === true;
    const amf: Record<string, unknown> = { tag: route.tag, routedVia: route.via, traceId };
    persistTaskEvents(bus, this.opts.store, rc.context, rc.userMessage, { sdkPersistsUntilStop: !streaming });
    const direct = rc.context.state.get(DIRECT_ANSWER_KEY) as DirectAnswer | undefined;
    const { entry, deadline } = this.track(taskId, contextId, bus, rc.userMessage, amf, direct);
    const { session } = entry;
    // A non-blocking or streaming request shows the task at once; a blocking one when it must.
    if (streaming || rc.request.configuration?.returnImmediately === true) session.show();

    deadline.working();
    const work = this.opts.tasks.submit({
      tag: route.tag,
      task: route.text,
      messages: [{ role: 'user', content: route.text }],
      stream: streaming,
      // The deadline above decides when the client stops waiting; this only bounds the wait.
      timeoutMs: MAX_TIMER_MS,
      traceId,
      messageId: rc.userMessage.messageId,
      // One id for both: the A2A task is the mesh task (amftaskid must be a UUID, so others get a new one).
      ...(UUID_PATTERN.test(taskId) ? { taskId } : {}),
      ...(route.data ? { input: route.data } : {}),
      onAnnounced: (meshTaskId) => {
        entry.meshTaskId = meshTaskId;
        Object.assign(amf, { taskId: meshTaskId });
        // announced → submitted, now naming the mesh task (when the task is already shown).
        if (session.isShown) session.status(TaskState.TASK_STATE_SUBMITTED);
      },
      onUpdate: this.updates(taskId, entry, deadline, route),
    });
    await this.runToEnd(taskId, entry, deadline, route, work);
  };

  /** What the mesh tells of a task while it runs, shown on its A2A task. */
  private updates(
    taskId: string,
    entry: Running,
    deadline: TaskDeadline,
    route: A2aRoute,
  ): (u: TaskUpdate) => void {
    const { session } = entry;
    return (u) => {
      switch (u.kind) {
        case 'claimed':
          session.working(undefined, { agentId: u.agentId });
          return;
        case 'progress':
          session.working(u.message, { agentId: u.agentId });
          return;
        case 'blocked': {
          deadline.waitingForInput();
          const reason = u.reason || 'the worker needs input';
          // Kept for a restart before the client is told: a client that saw input-required may
          // answer after a crash that came right after.
          void this.keepWaiting(taskId, entry, route, reason).finally(() =>
            session.status(TaskState.TASK_STATE_INPUT_REQUIRED, reason),
          );
          return;
        }
        case 'partial':
          session.chunk(u.delta);
          return;
      }
    };
  }

  /** Waits for the mesh task's end and publishes it on the A2A task. */
  private async runToEnd(
    taskId: string,
    entry: Running,
    deadline: TaskDeadline,
    route: A2aRoute,
    work: Promise<TaskResult>,
  ): Promise<void> {
    const { session } = entry;
    let result: TaskResult;
    try {
      result = await work;
    } catch (err) {
      deadline.clear();
      this.running.delete(taskId);
      const e = toAmfError(err);
      // The coordinator stops while the task waits for its client: the next run takes it over.
      if (e.code === 'UNAVAILABLE' && entry.kept && session.isAwaitingInput) return;
      this.forgetWaiting(taskId, entry);
      if (session.cancelled) return; // cancelTask published the canceled status
      if (entry.expired) {
        session.status(TaskState.TASK_STATE_FAILED, entry.expired, { code: 'TIMEOUT' });
        return;
      }
      const reason = typeof e.details?.reason === 'string' ? e.details.reason : undefined;
      const state = reason === REJECTED_CODE ? TaskState.TASK_STATE_REJECTED : TaskState.TASK_STATE_FAILED;
      session.status(state, e.message, { code: e.code, ...(reason ? { reason } : {}) });
      return;
    }
    deadline.clear();
    this.running.delete(taskId);
    this.forgetWaiting(taskId, entry);
    if (session.cancelled) return;
    this.finish(session, result, route);
  }

  /**
   * Starts following one A2A task here: its session on `bus`, and the client's deadline (for the
   * result while the mesh works, for a person while it is input-required).
   */
  private track(
    taskId: string,
    contextId: string,
    bus: ExecutionEventBus,
    userMessage: Message,
    amf: Record<string, unknown>,
    direct?: DirectAnswer,
  ): { entry: Running; deadline: TaskDeadline } {
    const entry = {} as Running;
    const deadline = new TaskDeadline(
      { resultMs: this.opts.requestTimeoutMs, inputMs: this.opts.inputTtlMs },
      (_kind, message) => {
        entry.expired = message;
        // The lifecycle tells the worker and ends the mesh task; its ending rejects the wait.
        if (entry.meshTaskId) this.opts.tasks.cancel(entry.meshTaskId, 'requester_timeout', message);
        this.release(entry);
      },
    );
    entry.session = new TaskSession(
      taskId,
      contextId,
      bus,
      userMessage,
      amf,
      (followUp) => {
        if (!entry.meshTaskId) throw new UnsupportedOperationError(`task ${taskId} is not on the mesh yet`);
        this.opts.tasks.sendInput(entry.meshTaskId, followUp);
        this.forgetWaiting(taskId, entry);
        deadline.working();
      },
      direct,
    );
    this.running.set(taskId, entry);
    return { entry, deadline };
  }

  /**
   * Keeps an input-required task for the next run of the coordinator: its A2A task as the client
   * will see it (input-required, asking `prompt`), and what the mesh task needs to be taken over
   * (waitingTasks.ts). The lifecycle then leaves the mesh task open when this coordinator stops.
   * Never rejects: a task that cannot be kept still waits here.
   */
  private async keepWaiting(taskId: string, entry: Running, route: A2aRoute, prompt: string): Promise<void> {
    const { waiting } = this;
    const meshTaskId = entry.meshTaskId;
    const record = meshTaskId ? this.opts.tasks.get(meshTaskId) : undefined;
    if (!waiting || !meshTaskId || !record?.claimedBy) return;
    entry.kept = true;
    this.opts.tasks.keepWhileWaiting(meshTaskId, true);
    const { session } = entry;
    const question = agentText(session.contextId, taskId, prompt);
    try {
      // The task as the store has it so far (history, artifacts), or as it is first shown.
      const stored = await this.opts.store.load(taskId, OWN_CONTEXT);
      const task: Task = stored ?? {
        id: taskId,
        contextId: session.contextId,
        status: undefined,
        artifacts: [],
        history: [session.firstMessage],
        metadata: { amf: { ...session.amf } },
      };
      task.status = { state: TaskState.TASK_STATE_INPUT_REQUIRED, message: question, timestamp: now() };
      task.history = [...task.history, question];
      await waiting.put(taskId, {
        task: Task.toJSON(task),
        meshTaskId,
        announce: record.announce,
        claimedBy: record.claimedBy,
        attempt: record.attempt,
        tag: route.tag,
        routedVia: route.via,
        inputDeadline: Date.now() + this.opts.inputTtlMs,
        owner: this.owner,
      });
      // A follow-up or an end that came while the entry was written: it must not outlive the wait.
      if (!entry.kept) await waiting.remove(taskId);
    } catch (err) {
      this.opts.log?.('warn', `task ${taskId} waits for input but could not be kept for a restart`, {
        task_id: taskId,
        err: String(err),
      });
    }
  }

  /** The task no longer waits for input (a follow-up came, or it ended): nothing to take over. */
  private forgetWaiting(taskId: string, entry: Running): void {
    if (!entry.kept) return;
    entry.kept = false;
    if (entry.meshTaskId) this.opts.tasks.keepWhileWaiting(entry.meshTaskId, false);
    this.waiting?.remove(taskId).catch((err: unknown) =>
      this.opts.log?.('warn', `the kept input wait of task ${taskId} could not be deleted`, {
        task_id: taskId,
        err: String(err),
      }),
    );
  }

  /**
   * Takes over the tasks an earlier run of the coordinator left waiting for input: each is put back
   * in the A2A task store (GetTask shows it input-required), its mesh task is owned here again, and
   * it waits for the rest of its input TTL; one whose TTL ran out meanwhile fails now. From then on,
   * tasks that turn input-required are kept in `waiting`. Call before requests are served. Returns
   * how many wait on.
   */
  async restoreWaiting(waiting: Pick<WaitingTasks, 'put' | 'remove' | 'all'>): Promise<number> {
    this.waiting = waiting;
    this.restoredAt = Date.now();
    const kept = await waiting.all((id, why) =>
      this.opts.log?.('warn', `kept input wait of task ${id} dropped: ${why}`, { task_id: id }),
    );
    for (const [taskId, w] of kept) {
      // Another coordinator's (another data dir): it runs, or its own restart takes them over.
      if (w.owner !== this.owner) continue;
      if (this.running.has(taskId) || this.restored.has(taskId)) continue;
      const task = Task.fromJSON(w.task);
      await this.opts.store.save(task, OWN_CONTEXT);
      const adopted = this.opts.tasks.adoptWaiting(w.announce, w.claimedBy, w.attempt);
      if (!adopted) {
        await this.endRestored(taskId, task, w, 'its mesh task is followed elsewhere');
        continue;
      }
      this.rememberContext(task.contextId, w.tag);
      const left = w.inputDeadline - Date.now();
      const seconds = Math.round(this.opts.inputTtlMs / 1000);
      const message = `no reply to the agent's request for input within ${seconds} s (a2a.input_ttl_seconds)`;
      const expire = async (): Promise<void> => {
        // The lifecycle tells the worker and ends the mesh task with its one terminal event.
        this.opts.tasks.cancel(w.meshTaskId, 'requester_timeout', message);
        await this.endRestored(taskId, task, w, message);
      };
      if (left <= 0) {
        await expire();
        continue;
      }
      const timer = setTimeout(
        () => {
          if (this.restored.delete(taskId)) void expire();
        },
        Math.min(left, MAX_TIMER_MS),
      );
      timer.unref();
      this.restored.set(taskId, { waiting: w, timer });
    }
    return this.restored.size;
  }

  /** Fails a taken-over task that will not go on, in the store and in the bucket. */
  private async endRestored(taskId: string, task: Task, w: WaitingTask, message: string): Promise<void> {
    const failed: Task = {
      ...task,
      status: {
        state: TaskState.TASK_STATE_FAILED,
        message: agentText(task.contextId, taskId, message),
        timestamp: now(),
      },
    };
    try {
      await this.opts.store.save(failed, OWN_CONTEXT);
      await this.waiting?.remove(taskId);
    } catch (err) {
      this.opts.log?.('warn', `taken-over task ${taskId} could not be ended`, {
        task_id: taskId,
        mesh_task_id: w.meshTaskId,
        err: String(err),
      });
    }
  }

  /**
   * The client's next message to a task taken over from an earlier run: the task goes on, on the
   * same worker, as it would have on the run that started it.
   */
  private async resume(rc: RequestContext, bus: ExecutionEventBus, w: WaitingTask): Promise<void> {
    const { taskId, contextId } = rc;
    const stored = rc.task ?? Task.fromJSON(w.task);
    const first = stored.history.find((m) => m.role === Role.ROLE_USER) ?? rc.userMessage;
    const traceId = w.announce.amftraceid ?? traceIdForContext(contextId);
    const amf: Record<string, unknown> = {
      tag: w.tag,
      routedVia: w.routedVia,
      traceId,
      taskId: w.meshTaskId,
      agentId: w.claimedBy,
    };
    const streaming = rc.context.state.get(STREAMING_KEY) === true;
    persistTaskEvents(bus, this.opts.store, rc.context, rc.userMessage, { sdkPersistsUntilStop: !streaming });
    const { entry, deadline } = this.track(taskId, contextId, bus, first, amf);
    entry.meshTaskId = w.meshTaskId;
    entry.kept = true;
    entry.session.markShown();
    const route = { tag: w.tag, via: w.routedVia, text: '' } as A2aRoute;
    // Followed before the message is handed over, so no update of the worker's next step is missed.
    const work = this.opts.tasks.follow(w.meshTaskId, {
      onUpdate: this.updates(taskId, entry, deadline, route),
      attempt: w.attempt,
    });
    // The follow-up travels on core NATS: it goes once the holder is heard again after the restart
    // (back on NATS, its subscriptions in place), or it would be lost while the worker reconnects.
    const back = this.heardAgain(w.claimedBy, () => entry.released === true);
    void back.then(() =>
      entry.session.followUp({ ...messageInput(rc.userMessage), messageId: rc.userMessage.messageId }),
    );
    await this.runToEnd(taskId, entry, deadline, route, work);
  }

  /**
   * Resolves once `agentId` is heard (a heartbeat) after the waiting tasks were taken over, or after
   * the result timeout at the latest (the follow-up is then sent anyway), or once `released()`.
   */
  private async heardAgain(agentId: string, released: () => boolean): Promise<void> {
    const giveUp = Date.now() + this.opts.requestTimeoutMs;
    while (!released() && Date.now() < giveUp) {
      const seen = this.opts.agents.get(agentId)?.lastSeen ?? 0;
      if (seen > this.restoredAt) return;
      await new Promise((resolve) => setTimeout(resolve, HEARD_AGAIN_POLL_MS).unref());
    }
  }

  /** Publishes the answer: a Message when asked for and still possible, else artifacts and completed. */
  private finish(session: TaskSession, result: TaskResult, route: A2aRoute): void {
    const more = { agentId: result.agentId, taskId: result.taskId };
    if (result.respondWith === 'message') {
      if (session.answerWithMessage(result.text)) return;
      session.status(TaskState.TASK_STATE_COMPLETED, result.text, more);
      return;
    }
    const artifacts = handlerArtifacts(result.artifacts);
    // The answer text (and data) is the `result` artifact; an empty answer has none.
    if (result.text !== '' || result.data)
      artifacts.push(this.finalArtifact(session.resultArtifactId, result, route));
    session.end(TaskState.TASK_STATE_COMPLETED, undefined, more, artifacts);
  }

  private finalArtifact(artifactId: string, result: TaskResult, route: A2aRoute) {
    const metadata: Record<string, unknown> = {
      amfconfidence: Number.isFinite(result.confidence) ? result.confidence : null,
      amf: { agentId: result.agentId, taskId: result.taskId, traceId: result.traceId, tag: route.tag },
    };
    if (result.usage) metadata.usage = result.usage;
    const extensions: string[] = [];
    if (route.extension) {
      // The extension's answer fields (AMP: status, confidence, uncertainty) keyed by its URI.
      metadata[route.extension.uri] = route.extension.answer(result);
      extensions.push(route.extension.uri);
    }
    return resultArtifact(artifactId, result.text, result.data, metadata, extensions);
  }

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    const entry = this.running.get(taskId);
    if (entry && !entry.session.cancelled) {
      entry.session.cancelled = true;
      // The lifecycle tells the worker (amf.task.cancel) and ends the mesh task with one terminal
      // event; releasing afterwards only ends the dispatcher's wait.
      if (entry.meshTaskId)
        this.opts.tasks.cancel(entry.meshTaskId, 'task_cancelled', 'cancelled by the A2A client');
      this.release(entry);
    }
    entry?.session.stopped();
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId: entry?.session.contextId ?? '',
        status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() },
        metadata: { amf: { ...entry?.session.amf, cancelledBy: 'a2aClient' } },
      }),
    );
  };
}
