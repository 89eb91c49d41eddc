/**
 * Turns what a remote A2A agent answers (a Message, a Task, or a stream of task, status and artifact
 * events) into one reply: its text, its state, and the text deltas to stream on. The answer of a
 * task is the text of its artifacts; when it has none, the text of its final status message.
 */
import type { Artifact, Message, Part, StreamResponse, Task, TaskStatus } from '@a2a-js/sdk';
import { TaskState } from '@a2a-js/sdk';

/** A task state in the v0.3/AMP spelling, readable in logs, CLI output and errors. */
export type A2aReplyState =
  | 'submitted'
  | 'working'
  | 'completed'
  | 'failed'
  | 'canceled'
  | 'rejected'
  | 'input-required'
  | 'auth-required'
  | 'unknown';

/** A file part of the answer: named, never fetched by us. */
export interface A2aFileRef {
  name: string;
  mediaType: string;
  url?: string;
  bytes?: number;
}

/** The whole answer of a remote agent to one message. */
export interface A2aReply {
  /** A direct Message, or a Task. */
  kind: 'message' | 'task';
  state: A2aReplyState;
  text: string;
  taskId?: string;
  contextId?: string;
  /** `data` parts, in order. */
  data: unknown[];
  files: A2aFileRef[];
}

const STATE_NAMES: Partial<Record<TaskState, A2aReplyState>> = {
  [TaskState.TASK_STATE_SUBMITTED]: 'submitted',
  [TaskState.TASK_STATE_WORKING]: 'working',
  [TaskState.TASK_STATE_COMPLETED]: 'completed',
  [TaskState.TASK_STATE_FAILED]: 'failed',
  [TaskState.TASK_STATE_CANCELED]: 'canceled',
  [TaskState.TASK_STATE_REJECTED]: 'rejected',
  [TaskState.TASK_STATE_INPUT_REQUIRED]: 'input-required',
  [TaskState.TASK_STATE_AUTH_REQUIRED]: 'auth-required',
};

/** The readable name of a task state. */
export function stateName(state: TaskState | undefined): A2aReplyState {
  return (state !== undefined && STATE_NAMES[state]) || 'unknown';
}

/** Terminal states end a task; interrupted ones wait for a client we cannot be (the mesh is headless). */
export function isFinalState(state: A2aReplyState): boolean {
  return ['completed', 'failed', 'canceled', 'rejected', 'input-required', 'auth-required'].includes(state);
}

/**
 * The text parts of `parts`. A message's parts are separate pieces (joined by newlines); an
 * artifact's parts are usually the chunks it was streamed in (`append`), so they are concatenated.
 */
export function partsText(parts: readonly Part[] | undefined, separator = '\n'): string {
  const out: string[] = [];
  for (const p of parts ?? []) if (p?.content?.$case === 'text') out.push(p.content.value);
  return out.join(separator);
}

function collectParts(parts: readonly Part[] | undefined, reply: A2aReply): void {
  for (const p of parts ?? []) {
    const c = p?.content;
    if (c?.$case === 'data') reply.data.push(c.value);
    else if (c?.$case === 'url' || c?.$case === 'raw')
      reply.files.push({
        name: p.filename || '(unnamed)',
        mediaType: p.mediaType || 'application/octet-stream',
        ...(c.$case === 'url' ? { url: c.value } : { bytes: c.value.length }),
      });
  }
}

/** The reply for a direct Message answer. */
export function replyFromMessage(message: Message): A2aReply {
  const reply: A2aReply = {
    kind: 'message',
    state: 'completed',
    text: partsText(message.parts),
    data: [],
    files: [],
    ...(message.taskId ? { taskId: message.taskId } : {}),
    ...(message.contextId ? { contextId: message.contextId } : {}),
  };
  collectParts(message.parts, reply);
  return reply;
}

function artifactsText(artifacts: readonly Artifact[]): string {
  return artifacts
    .map((a) => partsText(a.parts, ''))
    .filter((t) => t.length > 0)
    .join('\n');
}

/** The reply for a Task answer (in whatever state it is). */
export function replyFromTask(task: Task): A2aReply {
  const artifacts = Array.isArray(task.artifacts) ? task.artifacts : [];
  const text = artifactsText(artifacts) || partsText(task.status?.message?.parts);
  const reply: A2aReply = {
    kind: 'task',
    state: stateName(task.status?.state),
    text,
    taskId: task.id,
    ...(task.contextId ? { contextId: task.contextId } : {}),
    data: [],
    files: [],
  };
  for (const a of artifacts) collectParts(a.parts, reply);
  return reply;
}

/** The reply for what `sendMessage` returned. */
export function replyFromResult(result: Message | Task): A2aReply {
  return 'messageId' in result && !('status' in result)
    ? replyFromMessage(result as Message)
    : replyFromTask(result as Task);
}

/** What one stream event means for the caller. */
export interface StreamStep {
  /** New answer text to pass on. */
  delta?: string;
  /** A status message of a task still at work (progress, not answer). */
  progress?: string;
  state: A2aReplyState;
}

/**
 * Folds a stream of A2A events into a reply. Artifact text is passed on as it arrives; a status
 * message counts as the answer only when the task ends without artifacts.
 */
export class StreamCollector {
  private kind: 'message' | 'task' = 'task';
  private state: A2aReplyState = 'submitted';
  private taskId: string | undefined;
  private contextId: string | undefined;
  private readonly artifacts = new Map<string, Artifact>();
  /** Per artifact, the text already passed on as deltas. */
  private readonly sentText = new Map<string, string>();
  private finalStatusText = '';
  private messageReply: A2aReply | undefined;

  /** Takes one event; returns what it changes. */
  accept(event: StreamResponse): StreamStep {
    const payload = event.payload;
    switch (payload?.$case) {
      case 'message': {
        this.kind = 'message';
        this.messageReply = replyFromMessage(payload.value);
        this.state = 'completed';
        return { delta: this.messageReply.text, state: this.state };
      }
      case 'task': {
        const task = payload.value;
        this.taskId = task.id;
        if (task.contextId) this.contextId = task.contextId;
        let delta = '';
        for (const a of task.artifacts ?? []) delta += this.storeArtifact(a);
        return { ...this.status(task.status), ...(delta ? { delta } : {}) };
      }
      case 'statusUpdate':
        if (payload.value.contextId) this.contextId = payload.value.contextId;
        this.taskId ??= payload.value.taskId;
        return this.status(payload.value.status);
      case 'artifactUpdate': {
        const { artifact, append } = payload.value;
        if (!artifact) return { state: this.state };
        const previous = this.artifacts.get(artifact.artifactId);
        const delta = this.storeArtifact(
          append && previous ? { ...previous, parts: [...previous.parts, ...artifact.parts] } : artifact,
        );
        return { state: this.state, ...(delta ? { delta } : {}) };
      }
      default:
        return { state: this.state };
    }
  }

  /**
   * Records an artifact's current content and returns the text not passed on yet. Agents that
   * stream chunks often end with a replacement (`append: false`) repeating the whole text: only its
   * new tail is passed on. A replacement that does not start with what was sent is taken as one
   * more chunk (some 0.3 peers lose the `append` flag), so no answer text is ever dropped.
   */
  private storeArtifact(artifact: Artifact): string {
    const full = partsText(artifact.parts, '');
    const sent = this.sentText.get(artifact.artifactId) ?? '';
    const previous = this.artifacts.get(artifact.artifactId);
    if (full.startsWith(sent)) {
      this.artifacts.set(artifact.artifactId, artifact);
      this.sentText.set(artifact.artifactId, full);
      return full.slice(sent.length);
    }
    this.artifacts.set(
      artifact.artifactId,
      previous ? { ...previous, parts: [...previous.parts, ...artifact.parts] } : artifact,
    );
    this.sentText.set(artifact.artifactId, sent + full);
    return full;
  }

  private status(status: TaskStatus | undefined): StreamStep {
    this.state = stateName(status?.state);
    const text = partsText(status?.message?.parts);
    if (!text) return { state: this.state };
    if (isFinalState(this.state)) {
      this.finalStatusText = text;
      return { state: this.state };
    }
    return { state: this.state, progress: text };
  }

  /** True once the stream reached a state after which nothing more is expected. */
  get done(): boolean {
    return isFinalState(this.state);
  }

  /** The reply so far (complete once `done`). */
  reply(): A2aReply {
    if (this.messageReply) return this.messageReply;
    const artifacts = [...this.artifacts.values()];
    const reply: A2aReply = {
      kind: this.kind,
      state: this.state,
      text: artifactsText(artifacts) || this.finalStatusText,
      data: [],
      files: [],
      ...(this.taskId ? { taskId: this.taskId } : {}),
      ...(this.contextId ? { contextId: this.contextId } : {}),
    };
    for (const a of artifacts) collectParts(a.parts, reply);
    return reply;
  }
}
