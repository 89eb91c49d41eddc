/**
 * One A2A task while it runs, shared by the coordinator's and the workers' executors: it publishes
 * the task to the SDK's event bus, shows it only when needed (so a handler that answers with a Message
 * leaves no task behind), asks for input and takes follow-up messages, and tells follow-up requests
 * when the task next stops (input-required again, or an end).
 *
 * A follow-up message reaches the SDK as a new `execute()` on the same bus (the SDK keeps a bus alive
 * while its task is input-required); that call publishes the task again (working), so the answer to
 * the follow-up begins with the Task as A2A 1.0 section 3.1.2 requires of a stream, hands the message
 * over and waits for the next stop, so the SDK settles the bus by the state the task really reached.
 *
 * A task that ends before anything of it was published, on a request of the light path
 * (lightSendMessage.ts), is handed to that request as one final Task or Message instead of its
 * events: the Task is built as the events would have left it in the store.
 */
import { randomUUID } from 'node:crypto';
import { Role, TaskState, type Artifact, type Message, type Part, type Task } from '@a2a-js/sdk';
import { AgentEvent, type ExecutionEventBus } from '@a2a-js/sdk/server';
import type { ResultArtifactPayload } from '../../events/payloads.js';
import { chunkArtifact, statusUpdate, submittedTask, isTerminalTaskState } from './messageParts.js';
import type { DirectAnswer } from './lightSendMessage.js';

/** What a follow-up carries to the handler. */
export interface FollowUp {
  text: string;
  data?: Record<string, unknown>;
  messageId?: string;
}

export class TaskSession {
  cancelled = false;
  private shown = false;
  private chunks = 0;
  private awaitingInput = false;
  private stopWaiters: Array<() => void> = [];
  readonly resultArtifactId = randomUUID();

  constructor(
    readonly taskId: string,
    readonly contextId: string,
    private readonly bus: ExecutionEventBus,
    private readonly userMessage: Message,
    /** The task's `amf` metadata so far (camelCase keys); every status update repeats it. */
    readonly amf: Record<string, unknown>,
    /** Hands a follow-up to the running handler; throws when it cannot be delivered. */
    private readonly deliver: (followUp: FollowUp) => void,
    /** The light path's request waiting for this task, if any (lightSendMessage.ts). */
    private direct?: DirectAnswer,
  ) {}

  /** Publishes the task (submitted, with the user's message) the first time something needs it. */
  show(): void {
    if (this.shown) return;
    this.shown = true;
    this.bus.publish(AgentEvent.task(submittedTask(this.taskId, this.contextId, this.userMessage, this.amf)));
  }

  get isShown(): boolean {
    return this.shown;
  }

  /** The message that started the task. */
  get firstMessage(): Message {
    return this.userMessage;
  }

  /** The task exists already (an earlier coordinator run showed it): nothing publishes it anew. */
  markShown(): void {
    this.shown = true;
  }

  status(state: TaskState, text?: string, more?: Record<string, unknown>): void {
    if (this.cancelled) return;
    Object.assign(this.amf, more);
    if (isTerminalTaskState(state) && this.answerDirectly(state, text, [])) return;
    this.show();
    this.bus.publish(
      AgentEvent.statusUpdate(statusUpdate(this.taskId, this.contextId, state, text, this.amf)),
    );
    if (state === TaskState.TASK_STATE_INPUT_REQUIRED) this.awaitingInput = true;
    if (state === TaskState.TASK_STATE_INPUT_REQUIRED || isTerminalTaskState(state)) this.stopped();
  }

  /**
   * Working, with an optional status message. Without one it is shown only once the task is (a
   * claim alone does not show a task, so a handler can still answer with a Message).
   */
  working(text?: string, more?: Record<string, unknown>): void {
    if (!this.shown && !text) {
      Object.assign(this.amf, more);
      return;
    }
    this.status(TaskState.TASK_STATE_WORKING, text, more);
  }

  /** A streamed chunk of the answer. */
  chunk(delta: string): void {
    if (this.cancelled) return;
    this.show();
    this.bus.publish(
      AgentEvent.artifactUpdate({
        taskId: this.taskId,
        contextId: this.contextId,
        artifact: chunkArtifact(this.resultArtifactId, delta),
        append: this.chunks > 0,
        lastChunk: false,
        metadata: undefined,
      }),
    );
    this.chunks += 1;
  }

  artifact(artifact: Artifact, lastChunk = true): void {
    if (this.cancelled) return;
    this.show();
    this.bus.publish(
      AgentEvent.artifactUpdate({
        taskId: this.taskId,
        contextId: this.contextId,
        artifact,
        append: false,
        lastChunk,
        metadata: undefined,
      }),
    );
  }

  /**
   * Ends the task: its `artifacts`, then its terminal `state` (with a status message when `text` is
   * given). Published as events, or handed over as one Task (see the module comment).
   */
  end(
    state: TaskState,
    text: string | undefined,
    more: Record<string, unknown>,
    artifacts: Artifact[],
  ): void {
    if (this.cancelled) return;
    if (this.answerDirectly(state, text, artifacts, more)) return;
    for (const artifact of artifacts) this.artifact(artifact);
    this.status(state, text, more);
  }

  /**
   * Hands the ended task to the light path's request, when it waits and nothing of the task was
   * published; false otherwise. The Task is what the task event, the artifact updates and the status
   * update would have made of it: the first message, the status message after it, the artifacts in
   * order, and the last `amf` block as its metadata.
   */
  private answerDirectly(
    state: TaskState,
    text: string | undefined,
    artifacts: Artifact[],
    more?: Record<string, unknown>,
  ): boolean {
    const direct = this.direct;
    if (!direct || this.shown) return false;
    Object.assign(this.amf, more);
    const { status, metadata } = statusUpdate(this.taskId, this.contextId, state, text, this.amf);
    const task: Task = {
      id: this.taskId,
      contextId: this.contextId,
      status,
      artifacts,
      history: status?.message ? [this.userMessage, status.message] : [this.userMessage],
      metadata,
    };
    this.shown = true;
    this.direct = undefined;
    direct(task);
    this.stopped();
    return true;
  }

  /** The answer as a Message, when no part of the task was shown; false when it is too late. */
  answerWithMessage(text: string): boolean {
    if (this.shown || this.cancelled) return false;
    const message: Message = {
      messageId: randomUUID(),
      contextId: this.contextId,
      taskId: '',
      role: Role.ROLE_AGENT,
      parts: [textPart(text)],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
    const direct = this.direct;
    this.direct = undefined;
    if (direct) direct(message);
    else this.bus.publish(AgentEvent.message(message));
    this.stopped();
    return true;
  }

  /** True while the handler waits for the requester's next message. */
  get isAwaitingInput(): boolean {
    return this.awaitingInput;
  }

  /**
   * Hands a follow-up to the handler and resolves when the task next stops. The task is published
   * first, working again: a stream that answers a message to an existing task begins with the Task
   * (the SDKs' clients refuse a status update before it, -32004). The event carries no history or
   * artifacts: the SDK's result managers merge it with the stored task, which keeps both. A
   * follow-up that cannot be delivered (the mesh task ended meanwhile) leaves the task
   * input-required with the reason as its status message, rather than failing the request's bus.
   */
  async followUp(followUp: FollowUp): Promise<void> {
    const stop = new Promise<void>((resolve) => this.stopWaiters.push(resolve));
    this.awaitingInput = false;
    if (!this.cancelled)
      this.bus.publish(
        AgentEvent.task({
          ...submittedTask(this.taskId, this.contextId, this.userMessage, this.amf),
          status: {
            state: TaskState.TASK_STATE_WORKING,
            message: undefined,
            timestamp: new Date().toISOString(),
          },
          history: [],
        }),
      );
    try {
      this.deliver(followUp);
    } catch (err) {
      this.status(
        TaskState.TASK_STATE_INPUT_REQUIRED,
        `the message was not delivered: ${err instanceof Error ? err.message : String(err)}`,
      );
      return;
    }
    await stop;
  }

  /** Ends every follow-up's wait (the task stopped, or it ends without another status). */
  stopped(): void {
    const waiters = this.stopWaiters;
    this.stopWaiters = [];
    for (const w of waiters) w();
  }
}

function textPart(text: string): Part {
  return {
    content: { $case: 'text', value: text },
    metadata: undefined,
    filename: '',
    mediaType: 'text/plain',
  };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** One part of a handler's artifact as an SDK Part; undefined for a part of no known kind. */
function artifactPart(p: Record<string, unknown>): Part | undefined {
  if (typeof p.text === 'string') return textPart(p.text);
  if (isObject(p.data))
    return {
      content: { $case: 'data', value: p.data },
      metadata: undefined,
      filename: '',
      mediaType: 'application/json',
    };
  const file = p.file;
  if (!isObject(file)) return undefined;
  const filename = typeof file.name === 'string' ? file.name : '';
  const mediaType = typeof file.mediaType === 'string' ? file.mediaType : 'application/octet-stream';
  if (typeof file.uri === 'string')
    return { content: { $case: 'url', value: file.uri }, metadata: undefined, filename, mediaType };
  if (typeof file.bytes === 'string')
    return {
      content: { $case: 'raw', value: Buffer.from(file.bytes, 'base64') },
      metadata: undefined,
      filename,
      mediaType,
    };
  return undefined;
}

/** A handler's artifacts (as a final result carries them) as SDK Artifacts; empty ones dropped. */
export function handlerArtifacts(artifacts: readonly ResultArtifactPayload[] | undefined): Artifact[] {
  const out: Artifact[] = [];
  for (const [i, a] of (artifacts ?? []).entries()) {
    const parts = (Array.isArray(a.parts) ? a.parts : [])
      .map((p) => (isObject(p) ? artifactPart(p) : undefined))
      .filter((p): p is Part => p !== undefined);
    if (parts.length === 0) continue;
    out.push({
      artifactId: randomUUID(),
      name: typeof a.name === 'string' ? a.name : `artifact-${i + 1}`,
      description: typeof a.description === 'string' ? a.description : '',
      parts,
      metadata: undefined,
      extensions: [],
    });
  }
  return out;
}
