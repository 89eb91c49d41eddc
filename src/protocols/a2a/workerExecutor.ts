/**
 * A worker as an A2A agent: each A2A task runs the worker's own handler (MeshWorker.run), which
 * publishes the same claim, progress, partial and final events on NATS as a mesh task, with the A2A
 * task id, so the coordinator's UI sees direct work too. The capability is `metadata.tag` when it is
 * one of the worker's tags, else the worker's first tag.
 */
import { randomUUID } from 'node:crypto';
import { TaskState, type SendMessageRequest } from '@a2a-js/sdk';
import {
  AgentEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type TaskStore,
} from '@a2a-js/sdk/server';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import type { MeshWorker } from '../../worker/meshWorker.js';
import { persistTaskEvents, STREAMING_KEY } from './a2aServer.js';
import {
  chunkArtifact,
  messageInput,
  resultArtifact,
  statusUpdate,
  submittedTask,
  traceIdForContext,
} from './messageParts.js';

export interface WorkerExecutorOptions {
  /** The A2A task store, kept current by the executor for the task's whole life. */
  store: TaskStore;
  worker: () => MeshWorker;
  tags: readonly string[];
}

interface Running {
  controller: AbortController;
  contextId: string;
  /** The task's `amf` metadata (a cancel's status update must carry it too). */
  amf: Record<string, unknown>;
  cancelled: boolean;
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

  execute = async (rc: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const { taskId, contextId } = rc;
    const tag = this.tagFor(rc.request);
    const input = messageInput(rc.userMessage);
    const streaming = rc.context.state.get(STREAMING_KEY) === true;
    const traceId = traceIdForContext(contextId);
    const worker = this.opts.worker();
    const amf: Record<string, unknown> = { tag, trace_id: traceId, agent_id: worker.agentId };
    // A status update's metadata replaces the task's: each one carries everything known so far.
    const status = (state: TaskState, text?: string, more?: Record<string, unknown>) =>
      bus.publish(
        AgentEvent.statusUpdate(statusUpdate(taskId, contextId, state, text, Object.assign(amf, more))),
      );
    const task = submittedTask(taskId, contextId, rc.userMessage, amf);
    persistTaskEvents(bus, this.opts.store, rc.context, rc.userMessage);
    bus.publish(AgentEvent.task(task));
    const entry: Running = { controller: new AbortController(), contextId, amf, cancelled: false };
    this.running.set(taskId, entry);
    status(TaskState.TASK_STATE_WORKING);
    const artifactId = randomUUID();
    let chunks = 0;
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
          ...(input.data ? { input: input.data } : {}),
        },
        {
          origin: 'direct',
          signal: entry.controller.signal,
          onChunk: (delta) => {
            if (entry.cancelled) return;
            bus.publish(
              AgentEvent.artifactUpdate({
                taskId,
                contextId,
                artifact: chunkArtifact(artifactId, delta),
                append: chunks > 0,
                lastChunk: false,
                metadata: undefined,
              }),
            );
            chunks += 1;
          },
          onProgress: (message) => {
            if (!entry.cancelled) status(TaskState.TASK_STATE_WORKING, message);
          },
        },
      )
      .finally(() => this.running.delete(taskId));
    if (entry.cancelled) return; // cancelTask published the canceled status
    if (!outcome.ok) {
      status(TaskState.TASK_STATE_FAILED, outcome.message, { code: outcome.code });
      return;
    }
    const { result } = outcome;
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: resultArtifact(artifactId, result.text, result.data, {
          ...(result.confidence !== undefined ? { amfconfidence: result.confidence } : {}),
          amf: { agent_id: worker.agentId, task_id: taskId, trace_id: traceId, tag },
          ...(result.usage ? { usage: result.usage } : {}),
        }),
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    status(TaskState.TASK_STATE_COMPLETED);
  };

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    const entry = this.running.get(taskId);
    if (entry && !entry.cancelled) {
      entry.cancelled = true;
      entry.controller.abort(); // the handler's signal; the worker publishes the failed final on NATS
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
