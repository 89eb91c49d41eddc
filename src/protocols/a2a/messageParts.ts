/**
 * A2A messages in and out of the mesh: the text and JSON data a mesh task takes from an A2A message,
 * and the SDK-shaped messages, status updates and artifacts the executors publish. Works on the SDK's
 * internal types (parts are `{content: {$case, value}}`); the SDK translates them for 1.0 and 0.3.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  Role,
  TaskState,
  type Artifact,
  type Message,
  type Part,
  type Task,
  type TaskStatusUpdateEvent,
} from '@a2a-js/sdk';
import { ContentTypeNotSupportedError, RequestMalformedError } from '@a2a-js/sdk/errors';

/** What a mesh task takes from an A2A message. */
export interface MessageInput {
  text: string;
  /** The first JSON object data part, handed to handlers as `input`. */
  data?: Record<string, unknown>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** The media type of a part, lower case and without parameters ('' when it names none). */
function mediaTypeOf(part: Part): string {
  return (part.mediaType ?? '').split(';', 1)[0]!.trim().toLowerCase();
}

/**
 * What a raw (bytes) part holds, for the media types the card accepts (INPUT_MODES in
 * agentCards.ts): `text/plain` (or none) is UTF-8 text, `application/json` a JSON value. Anything
 * else is ContentTypeNotSupportedError: the mesh's handlers take text and JSON.
 */
function rawContent(part: Part, bytes: Uint8Array, i: number): { text: string } | { json: unknown } {
  const type = mediaTypeOf(part);
  if (type !== '' && type !== 'text/plain' && type !== 'application/json')
    throw new ContentTypeNotSupportedError(
      `message.parts[${i}] is raw ${type}: AMF mesh tasks take text/plain and application/json`,
    );
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw new ContentTypeNotSupportedError(
      `message.parts[${i}] holds bytes that are not UTF-8 text: AMF mesh tasks take text/plain and application/json`,
    );
  }
  if (type !== 'application/json') return { text };
  try {
    return { json: JSON.parse(text) as unknown };
  } catch (err) {
    throw new RequestMalformedError(
      `message.parts[${i}] is application/json but not JSON: ${(err as Error).message}`,
    );
  }
}

/**
 * Text parts (and raw text/plain ones) joined by newlines; JSON data parts (and raw application/json
 * ones) as input, and as text when there is no text part. URL parts are refused: a mesh task carries
 * content, and the coordinator fetches nothing a message points at.
 */
export function messageInput(message: Message): MessageInput {
  const texts: string[] = [];
  let data: Record<string, unknown> | undefined;
  let dataText: string | undefined;
  const addData = (value: unknown): void => {
    if (data === undefined && isObject(value)) data = value;
    dataText ??= JSON.stringify(value);
  };
  const parts = message.parts ?? [];
  if (parts.length === 0) throw new RequestMalformedError('message.parts must hold at least one part');
  if (parts.length > 64) throw new RequestMalformedError('message.parts holds more than 64 parts');
  for (const [i, part] of parts.entries()) {
    const content = part.content;
    if (content?.$case === 'text') texts.push(content.value);
    else if (content?.$case === 'data') addData(content.value);
    else if (content?.$case === 'raw') {
      const raw = rawContent(part, content.value, i);
      if ('text' in raw) texts.push(raw.text);
      else addData(raw.json);
    } else
      throw new ContentTypeNotSupportedError(
        `message.parts[${i}] is ${content ? `a ${content.$case} part` : 'empty'}: AMF mesh tasks take text, data and raw text/plain or application/json parts (content, not a link to it)`,
      );
  }
  const text = texts.length > 0 ? texts.join('\n') : (dataText ?? '');
  return data ? { text, data } : { text };
}

function textPart(text: string): Part {
  return {
    content: { $case: 'text', value: text },
    metadata: undefined,
    filename: '',
    mediaType: 'text/plain',
  };
}

function dataPart(data: Record<string, unknown>): Part {
  return {
    content: { $case: 'data', value: data },
    metadata: undefined,
    filename: '',
    mediaType: 'application/json',
  };
}

/** An agent message (status messages: progress, failure reasons). */
export function agentMessage(taskId: string, contextId: string, text: string): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The result artifact: the answer's text, its data as a data part, AMF and AMP fields in metadata. */
export function resultArtifact(
  artifactId: string,
  text: string,
  data: Record<string, unknown> | undefined,
  metadata: Record<string, unknown>,
  extensions: string[] = [],
): Artifact {
  return {
    artifactId,
    name: 'result',
    description: '',
    parts: data ? [textPart(text), dataPart(data)] : [textPart(text)],
    metadata,
    extensions,
  };
}

/** A chunk of a streamed answer (appended to the result artifact). */
export function chunkArtifact(artifactId: string, delta: string): Artifact {
  return {
    artifactId,
    name: 'result',
    description: '',
    parts: [textPart(delta)],
    metadata: undefined,
    extensions: [],
  };
}

/** TaskState values the SDK treats as terminal. */
export const TERMINAL_TASK_STATES: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

export function isTerminalTaskState(state: TaskState | undefined): boolean {
  return state !== undefined && TERMINAL_TASK_STATES.has(state);
}

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The mesh trace id of an A2A context: the contextId itself when it is a UUID (the SDK makes UUIDs),
 * else a UUID derived from it, so every message of one context lands in one trace.
 */
export function traceIdForContext(contextId: string): string {
  if (UUID_PATTERN.test(contextId)) return contextId.toLowerCase();
  const h = createHash('sha256').update(`a2a-context:${contextId}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * A status update carrying everything known so far in `metadata.amf` (an update's metadata replaces
 * the task's, so each one repeats the whole block).
 */
export function statusUpdate(
  taskId: string,
  contextId: string,
  state: TaskState,
  text: string | undefined,
  amf: Record<string, unknown>,
): TaskStatusUpdateEvent {
  return {
    taskId,
    contextId,
    status: {
      state,
      message: text ? agentMessage(taskId, contextId, text) : undefined,
      timestamp: new Date().toISOString(),
    },
    metadata: { amf: { ...amf } },
  };
}

/** The task as first published: submitted, with the user's message as its history. */
export function submittedTask(
  taskId: string,
  contextId: string,
  userMessage: Message,
  amf: Record<string, unknown>,
): Task {
  return {
    id: taskId,
    contextId,
    status: {
      state: TaskState.TASK_STATE_SUBMITTED,
      message: undefined,
      timestamp: new Date().toISOString(),
    },
    artifacts: [],
    history: [userMessage],
    metadata: { amf: { ...amf } },
  };
}
