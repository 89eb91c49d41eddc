/**
 * The coordinator as an A2A agent: each A2A task becomes one mesh task, dispatched through the
 * TaskDispatcher like an OpenAI request, and its A2A state follows the AMF lifecycle —
 * announced → submitted, claimed/progress → working, blocked → input-required, final → completed
 * (or a Message, when the handler answers with one), failed/expired → failed (rejected when the
 * handler rejected it), cancel → canceled. A follow-up message to an input-required task goes to the
 * worker holding it (`amf.task.input`). The A2A `contextId` is the mesh trace (`amftraceid`): one
 * conversation, one trace, and one agent: a new message of a known conversation goes to the tag its
 * last task went to (taskRouting.ts). A cancel reaches the worker as `amf.task.cancel` (the
 * lifecycle). The mesh may take `requestTimeoutMs` per message; an input-required task waits
 * `inputTtlMs` for the client's next one (taskDeadline.ts).
 */
import { TaskState, type SendMessageRequest } from '@a2a-js/sdk';
import {
  AgentEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type TaskStore,
  type ServerCallContext,
} from '@a2a-js/sdk/server';
import { RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { TaskDispatcher, TaskResult, TaskUpdate } from '../../coordinator/taskDispatcher.js';
import type { TaskLifecycle } from '../../coordinator/taskLifecycle.js';
import type { TaskInputMessage } from '../../coordinator/taskInput.js';
import { toAmfError } from '../../errors.js';
import { REJECTED_CODE } from '../../worker/handlerApi.js';
import { ampOutcome } from '../amp/ampService.js';
import { AMP_EXTENSION_URI } from './agentCards.js';
import { STREAMING_KEY } from './a2aServer.js';
import { persistTaskEvents } from './taskPersistence.js';
import { messageInput, resultArtifact, traceIdForContext, UUID_PATTERN } from './messageParts.js';
import { routeA2aMessage, type A2aRoute, type RoutingOptions } from './taskRouting.js';
import { MAX_TIMER_MS, TaskDeadline } from './taskDeadline.js';
import { handlerArtifacts, TaskSession } from './taskSession.js';

/** ServerCallContext.state key of the route chosen at admission. */
const ROUTE_KEY = 'amf.a2a.route';
/** Conversations whose agent is remembered (the oldest is forgotten first). */
const CONTEXTS_REMEMBERED = 10_000;
export interface CoordinatorExecutorOptions {
  /** The A2A task store, kept current by the executor for the task's whole life. */
  store: TaskStore;
  dispatcher: TaskDispatcher;
  lifecycle: TaskLifecycle;
  registry: AgentRegistry;
  /** How long the mesh may take to answer one message (the task fails after it). */
  requestTimeoutMs: number;
  /** How long an input-required task waits for the client's next message (`a2a.input_ttl_seconds`). */
  inputTtlMs: number;
  /** `a2a.default_agent`: where a message nothing else routes goes. */
  defaultAgent?: string | null;
  /** Hands a follow-up message to the worker holding a mesh task (src/coordinator/taskInput.ts). */
  sendInput: (meshTaskId: string, message: TaskInputMessage) => void;
  /** Told of each message no capability could be found for (the console shows these refusals). */
  onUnrouted?: (requested: string, message: string) => void;
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
  controller: AbortController;
  session: TaskSession;
  meshTaskId?: string;
  /** Why the client stopped waiting (a deadline ran out), once it did. */
  expired?: string;
}

function now(): string {
  return new Date().toISOString();
}

export class CoordinatorExecutor implements AgentExecutor {
  private readonly running = new Map<string, Running>();
  /** The tag each recent conversation (contextId) went to last, oldest first. */
  private readonly contexts = new Map<string, string>();
  private readonly routing: RoutingOptions;

  constructor(private readonly opts: CoordinatorExecutorOptions) {
    this.routing = {
      defaultAgent: opts.defaultAgent ?? null,
      contextTag: (contextId) => this.contexts.get(contextId),
    };
    opts.stopping?.addEventListener('abort', () => this.endOnStop(), { once: true });
  }

  /**
   * The coordinator stops: each task still working gets its final `failed` status (code
   * UNAVAILABLE) on its bus, which the SDK sends on every stream of it (`message/stream`,
   * `tasks/resubscribe`) before it closes them, and returns to a blocking `message/send`. A task
   * waiting for input is left as it is.
   */
  private endOnStop(): void {
    for (const entry of this.running.values()) {
      const { session } = entry;
      if (session.cancelled || session.isAwaitingInput) continue;
      session.status(TaskState.TASK_STATE_FAILED, STOPPING_MESSAGE, {
        code: 'UNAVAILABLE',
        reason: 'coordinator_stopping',
      });
      // Nothing more goes on it: the wait released next ends in runToEnd without a second status.
      session.cancelled = true;
      entry.controller.abort();
    }
  }

  private rememberContext(contextId: string, tag: string): void {
    this.contexts.delete(contextId);
    this.contexts.set(contextId, tag);
    if (this.contexts.size > CONTEXTS_REMEMBERED)
      this.contexts.delete(this.contexts.keys().next().value as string);
  }

  /** Admission check (before the SDK creates a task): routes the message or throws an A2A error. */
  admit(params: SendMessageRequest, context: ServerCallContext): void {
    try {
      context.state.set(ROUTE_KEY, routeA2aMessage(params, this.opts.registry, this.routing));
    } catch (err) {
      if (err instanceof RequestMalformedError) this.opts.onUnrouted?.(requestedBy(params), err.message);
      throw err;
    }
  }

  /** True when `a2aTaskId` runs here and waits for the requester's next message. */
  awaitsInput(a2aTaskId: string): boolean {
    return this.running.get(a2aTaskId)?.session.isAwaitingInput === true;
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
    const route =
      (rc.context.state.get(ROUTE_KEY) as A2aRoute | undefined) ??
      routeA2aMessage(rc.request, this.opts.registry, this.routing);
    this.rememberContext(contextId, route.tag);
    const traceId = traceIdForContext(contextId);
    const streaming = rc.context.state.get(STREAMING_KEY) === true;
    const amf: Record<string, unknown> = { tag: route.tag, routedVia: route.via, traceId };
    persistTaskEvents(bus, this.opts.store, rc.context, rc.userMessage, { sdkPersistsUntilStop: !streaming });
    const entry: Running = { controller: new AbortController() } as Running;
    // The client's waits: for the result while the mesh works, for a person while input-required.
    const deadline = new TaskDeadline(
      { resultMs: this.opts.requestTimeoutMs, inputMs: this.opts.inputTtlMs },
      (_kind, message) => {
        entry.expired = message;
        // The lifecycle tells the worker and ends the mesh task; its ending rejects submit below.
        if (entry.meshTaskId) this.opts.lifecycle.cancel(entry.meshTaskId, 'requester_timeout', message);
        entry.controller.abort();
      },
    );
    const session = new TaskSession(taskId, contextId, bus, rc.userMessage, amf, (followUp) => {
      if (!entry.meshTaskId) throw new UnsupportedOperationError(`task ${taskId} is not on the mesh yet`);
      this.opts.sendInput(entry.meshTaskId, followUp);
      deadline.working();
    });
    entry.session = session;
    this.running.set(taskId, entry);
    // A non-blocking or streaming request shows the task at once; a blocking one when it must.
    if (streaming || rc.request.configuration?.returnImmediately === true) session.show();

    const onUpdate = (u: TaskUpdate): void => {
      switch (u.kind) {
        case 'claimed':
          session.working(undefined, { agentId: u.agentId });
          return;
        case 'progress':
          session.working(u.message, { agentId: u.agentId });
          return;
        case 'blocked':
          deadline.waitingForInput();
          session.status(TaskState.TASK_STATE_INPUT_REQUIRED, u.reason || 'the worker needs input');
          return;
        case 'partial':
          session.chunk(u.delta);
          return;
      }
    };
    let result: TaskResult;
    deadline.working();
    try {
      result = await this.opts.dispatcher.submit({
        tag: route.tag,
        task: route.text,
        messages: [{ role: 'user', content: route.text }],
        stream: streaming,
        // The deadline above decides when the client stops waiting; this only bounds the wait.
        timeoutMs: MAX_TIMER_MS,
        signal: entry.controller.signal,
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
        onUpdate,
      });
    } catch (err) {
      deadline.clear();
      this.running.delete(taskId);
      if (session.cancelled) return; // cancelTask published the canceled status
      if (entry.expired) {
        session.status(TaskState.TASK_STATE_FAILED, entry.expired, { code: 'TIMEOUT' });
        return;
      }
      const e = toAmfError(err);
      const reason = typeof e.details?.reason === 'string' ? e.details.reason : undefined;
      const state = reason === REJECTED_CODE ? TaskState.TASK_STATE_REJECTED : TaskState.TASK_STATE_FAILED;
      session.status(state, e.message, { code: e.code, ...(reason ? { reason } : {}) });
      return;
    }
    deadline.clear();
    this.running.delete(taskId);
    if (session.cancelled) return;
    this.finish(session, result, route);
  };

  /** Publishes the answer: a Message when asked for and still possible, else artifacts and completed. */
  private finish(session: TaskSession, result: TaskResult, route: A2aRoute): void {
    const more = { agentId: result.agentId, taskId: result.taskId };
    if (result.respondWith === 'message') {
      if (session.answerWithMessage(result.text)) return;
      session.status(TaskState.TASK_STATE_COMPLETED, result.text, more);
      return;
    }
    const extra = handlerArtifacts(result.artifacts);
    for (const artifact of extra) session.artifact(artifact);
    // The answer text (and data) is the `result` artifact; an empty answer has none.
    if (result.text !== '' || result.data)
      session.artifact(this.finalArtifact(session.resultArtifactId, result, route));
    session.status(TaskState.TASK_STATE_COMPLETED, undefined, more);
  }

  private finalArtifact(artifactId: string, result: TaskResult, route: A2aRoute) {
    const metadata: Record<string, unknown> = {
      amfconfidence: Number.isFinite(result.confidence) ? result.confidence : null,
      amf: { agentId: result.agentId, taskId: result.taskId, traceId: result.traceId, tag: route.tag },
    };
    if (result.usage) metadata.usage = result.usage;
    const extensions: string[] = [];
    if (route.amp) {
      // AMP's answer fields (status, confidence, uncertainty) keyed by the extension URI.
      metadata[AMP_EXTENSION_URI] = { in_reply_to: route.amp.id, ...ampOutcome(result) };
      extensions.push(AMP_EXTENSION_URI);
    }
    return resultArtifact(artifactId, result.text, result.data, metadata, extensions);
  }

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    const entry = this.running.get(taskId);
    if (entry && !entry.session.cancelled) {
      entry.session.cancelled = true;
      // The lifecycle tells the worker (amf.task.cancel) and ends the mesh task with one terminal
      // event; aborting afterwards only releases the dispatcher's wait.
      if (entry.meshTaskId)
        this.opts.lifecycle.cancel(entry.meshTaskId, 'task_cancelled', 'cancelled by the A2A client');
      entry.controller.abort();
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
