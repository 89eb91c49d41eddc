/**
 * A worker as an A2A agent: each A2A task runs the worker's own handler (MeshWorker.run), which
 * publishes the same claim, progress, blocked, partial and final events on NATS as a mesh task, with
 * the A2A task id, so the coordinator's UI sees direct work too. The capability is `metadata.tag`
 * when it is one of the worker's tags, else the worker's first tag. A handler that asks for input
 * makes the task input-required; the next message with the task's id resumes the same handler.
 */
import { TaskState, type SendMessageRequest } from '@a2a-js/sdk';
import {
  AgentEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type TaskStore,
} from '@a2a-js/sdk/server';
import { RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { MeshWorker } from '../../worker/meshWorker.js';
import { REJECTED_CODE } from '../../worker/handlerApi.js';
import type { ResultArtifactPayload } from '../../events/payloads.js';
import { STREAMING_KEY } from './a2aServer.js';
import { persistTaskEvents } from './taskPersistence.js';
import { messageInput, resultArtifact, traceIdForContext } from './messageParts.js';
import { handlerArtifacts, TaskSession } from './taskSession.js';

export interface WorkerExecutorOptions {
  /** The A2A task store, kept current by the executor for the task's whole life. */
  store: TaskStore;
  worker: () => MeshWorker;
  tags: readonly string[];
}

interface Running {
  controller: AbortController;
  session: TaskSession;
}

function now(): string {
  return new Date().toISOString();
}

export class WorkerExecutor implements AgentExecutor {
  private readonly running = new Map<string, Running>();

  constructor(private readonly opts: WorkerExecutorOptions) {}

  /** The tag a message asks for; refuses tags this worker does not serve. */
  tagFor(params: SendMessageRequest): string {
    const wanted = params.message?.metadata?.tag ?? params.metadata?.tag;
    if (wanted === undefined) return this.opts.tags[0]!;
    if (typeof wanted !== 'string' || !this.opts.tags.includes(wanted))
      throw new RequestMalformedError(
        `this worker serves ${this.opts.tags.join(', ')}, not ${JSON.stringify(wanted).slice(0, 80)}`,
      );
    return wanted;
  }

  /** Admission check: the message has usable parts and a tag this worker serves. */
  admit(params: SendMessageRequest): void {
    this.tagFor(params);
    if (params.message) messageInput(params.message);
  }

  /** True when `taskId` runs here and its handler waits for the requester's next message. */
  awaitsInput(taskId: string): boolean {
    return this.running.get(taskId)?.session.isAwaitingInput === true;
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
    const tag = this.tagFor(rc.request);
    const input = messageInput(rc.userMessage);
    const streaming = rc.context.state.get(STREAMING_KEY) === true;
    const traceId = traceIdForContext(contextId);
    const worker = this.opts.worker();
    const amf: Record<string, unknown> = { tag, traceId, agentId: worker.agentId };
    persistTaskEvents(bus, this.opts.store, rc.context, rc.userMessage, { sdkPersistsUntilStop: !streaming });
    const session = new TaskSession(taskId, contextId, bus, rc.userMessage, amf, (followUp) => {
      if (!worker.provideInput(taskId, followUp))
        throw new UnsupportedOperationError(`task ${taskId} is not waiting for input`);
    });
    const entry: Running = { controller: new AbortController(), session };
    this.running.set(taskId, entry);
    if (streaming || rc.request.configuration?.returnImmediately === true) {
      session.show();
      session.working();
    }
    const outcome = await worker
      .run(
        {
          taskId,
          traceId,
          tag,
          text: input.text,
          messages: [{ role: 'user', content: input.text }],
          stream: streaming,
          attempt: 1,
          messageId: rc.userMessage.messageId,
          ...(input.data ? { input: input.data } : {}),
        },
        {
          origin: 'direct',
          signal: entry.controller.signal,
          onChunk: (delta) => session.chunk(delta),
          onProgress: (message) => session.working(message),
          onInputRequired: (prompt) => session.status(TaskState.TASK_STATE_INPUT_REQUIRED, prompt),
        },
      )
      .finally(() => this.running.delete(taskId));
    if (session.cancelled) return; // cancelTask published the canceled status
    if (!outcome.ok) {
      const state =
        outcome.code === REJECTED_CODE ? TaskState.TASK_STATE_REJECTED : TaskState.TASK_STATE_FAILED;
      session.status(state, outcome.message, { code: outcome.code });
      return;
    }
    const { result } = outcome;
    if (result.respondWith === 'message') {
      if (!session.answerWithMessage(result.text))
        session.status(TaskState.TASK_STATE_COMPLETED, result.text);
      return;
    }
    const extra = handlerArtifacts(result.artifacts as ResultArtifactPayload[] | undefined);
    for (const artifact of extra) session.artifact(artifact);
    if (result.text !== '' || result.data)
      session.artifact(
        resultArtifact(session.resultArtifactId, result.text, result.data, {
          ...(result.confidence !== undefined ? { amfconfidence: result.confidence } : {}),
          amf: { agentId: worker.agentId, taskId, traceId, tag },
          ...(result.usage ? { usage: result.usage } : {}),
        }),
      );
    session.status(TaskState.TASK_STATE_COMPLETED);
  };

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    const entry = this.running.get(taskId);
    if (entry && !entry.session.cancelled) {
      entry.session.cancelled = true;
      entry.controller.abort(); // the handler's signal; the worker publishes the failed final on NATS
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
