/**
 * The coordinator as an A2A agent: each A2A task becomes one mesh task, dispatched through the
 * TaskDispatcher like an OpenAI request, and its A2A state follows the AMF lifecycle —
 * announced → submitted, claimed/progress → working, blocked → input-required, final → completed,
 * failed/expired → failed, cancel → canceled. The A2A `contextId` is the mesh trace (`amftraceid`):
 * one conversation, one trace. A cancel reaches the worker as `amf.task.cancel` (the lifecycle).
 */
import { randomUUID } from 'node:crypto';
import { TaskState } from '@a2a-js/sdk';
import {
  AgentEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type TaskStore,
  type ServerCallContext,
} from '@a2a-js/sdk/server';
import type { SendMessageRequest } from '@a2a-js/sdk';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { TaskDispatcher, TaskResult, TaskUpdate } from '../../coordinator/taskDispatcher.js';
import type { TaskLifecycle } from '../../coordinator/taskLifecycle.js';
import { toAmfError } from '../../errors.js';
import { ampOutcome } from '../amp/ampService.js';
import { AMP_EXTENSION_URI } from './agentCards.js';
import { persistTaskEvents, STREAMING_KEY } from './a2aServer.js';
import {
  chunkArtifact,
  resultArtifact,
  statusUpdate,
  submittedTask,
  traceIdForContext,
  UUID_PATTERN,
} from './messageParts.js';
import { routeA2aMessage, type A2aRoute } from './taskRouting.js';

/** ServerCallContext.state key of the route chosen at admission. */
const ROUTE_KEY = 'amf.a2a.route';
export interface CoordinatorExecutorOptions {
  /** The A2A task store, kept current by the executor for the task's whole life. */
  store: TaskStore;
  dispatcher: TaskDispatcher;
  lifecycle: TaskLifecycle;
  registry: AgentRegistry;
  requestTimeoutMs: number;
}

interface Running {
  controller: AbortController;
  contextId: string;
  meshTaskId?: string;
  /** The task's `amf` metadata so far (a cancel's status update must carry it too). */
  amf: Record<string, unknown>;
  cancelled: boolean;
}

function now(): string {
  return new Date().toISOString();
}

export class CoordinatorExecutor implements AgentExecutor {
  private readonly running = new Map<string, Running>();

  constructor(private readonly opts: CoordinatorExecutorOptions) {}

  /** Admission check (before the SDK creates a task): routes the message or throws an A2A error. */
  admit(params: SendMessageRequest, context: ServerCallContext): void {
    context.state.set(ROUTE_KEY, routeA2aMessage(params, this.opts.registry));
  }

  /** The mesh task behind an A2A task while it runs (for tests and diagnostics). */
  meshTaskOf(a2aTaskId: string): string | undefined {
    return this.running.get(a2aTaskId)?.meshTaskId;
  }

  execute = async (rc: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const { taskId, contextId } = rc;
    const route =
      (rc.context.state.get(ROUTE_KEY) as A2aRoute | undefined) ??
      routeA2aMessage(rc.request, this.opts.registry);
    const traceId = traceIdForContext(contextId);
    const streaming = rc.context.state.get(STREAMING_KEY) === true;
    const amf: Record<string, unknown> = { tag: route.tag, routed_via: route.via, trace_id: traceId };
    // A status update's metadata replaces the task's: each one carries everything known so far.
    const status = (state: TaskState, text?: string, more?: Record<string, unknown>): void => {
      Object.assign(amf, more);
      bus.publish(AgentEvent.statusUpdate(statusUpdate(taskId, contextId, state, text, amf)));
    };
    const task = submittedTask(taskId, contextId, rc.userMessage, amf);
    persistTaskEvents(bus, this.opts.store, rc.context, rc.userMessage);
    bus.publish(AgentEvent.task(task));

    const entry: Running = { controller: new AbortController(), contextId, amf, cancelled: false };
    this.running.set(taskId, entry);
    const artifactId = randomUUID();
    let streamedChunks = 0;
    const onUpdate = (u: TaskUpdate): void => {
      if (entry.cancelled) return;
      switch (u.kind) {
        case 'claimed':
          status(TaskState.TASK_STATE_WORKING, undefined, { agent_id: u.agentId });
          return;
        case 'progress':
          status(TaskState.TASK_STATE_WORKING, u.message, { agent_id: u.agentId });
          return;
        case 'blocked':
          status(TaskState.TASK_STATE_INPUT_REQUIRED, u.reason || 'the worker is blocked');
          return;
        case 'partial':
          bus.publish(
            AgentEvent.artifactUpdate({
              taskId,
              contextId,
              artifact: chunkArtifact(artifactId, u.delta),
              append: streamedChunks > 0,
              lastChunk: false,
              metadata: undefined,
            }),
          );
          streamedChunks += 1;
          return;
      }
    };
    let result: TaskResult;
    try {
      result = await this.opts.dispatcher.submit({
        tag: route.tag,
        task: route.text,
        messages: [{ role: 'user', content: route.text }],
        stream: streaming,
        timeoutMs: this.opts.requestTimeoutMs,
        signal: entry.controller.signal,
        traceId,
        // One id for both: the A2A task is the mesh task (amftaskid must be a UUID, so others get a new one).
        ...(UUID_PATTERN.test(taskId) ? { taskId } : {}),
        ...(route.data ? { input: route.data } : {}),
        onAnnounced: (meshTaskId) => {
          entry.meshTaskId = meshTaskId;
          // announced → submitted, now naming the mesh task.
          status(TaskState.TASK_STATE_SUBMITTED, undefined, { task_id: meshTaskId });
        },
        onUpdate,
      });
    } catch (err) {
      this.running.delete(taskId);
      if (entry.cancelled) return; // cancelTask published the canceled status
      const e = toAmfError(err);
      status(TaskState.TASK_STATE_FAILED, e.message, {
        code: e.code,
        ...(e.details?.reason ? { reason: e.details.reason } : {}),
      });
      return;
    }
    this.running.delete(taskId);
    if (entry.cancelled) return;
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        // Replaces the streamed chunks with the whole answer and its metadata.
        artifact: this.finalArtifact(artifactId, result, route),
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    status(TaskState.TASK_STATE_COMPLETED, undefined, { agent_id: result.agentId, task_id: result.taskId });
  };

  private finalArtifact(artifactId: string, result: TaskResult, route: A2aRoute) {
    const metadata: Record<string, unknown> = {
      amfconfidence: Number.isFinite(result.confidence) ? result.confidence : null,
      amf: { agent_id: result.agentId, task_id: result.taskId, trace_id: result.traceId, tag: route.tag },
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
    if (entry && !entry.cancelled) {
      entry.cancelled = true;
      // The lifecycle tells the worker (amf.task.cancel) and ends the mesh task with one terminal
      // event; aborting afterwards only releases the dispatcher's wait.
      if (entry.meshTaskId)
        this.opts.lifecycle.cancel(entry.meshTaskId, 'task_cancelled', 'cancelled by the A2A client');
      entry.controller.abort();
    }
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId: entry?.contextId ?? '',
        status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() },
        metadata: { amf: { ...entry?.amf, cancelled_by: 'a2a_client' } },
      }),
    );
  };
}
