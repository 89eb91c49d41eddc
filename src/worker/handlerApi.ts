/**
 * The TypeScript handler API for workers. A handler is an async function returning the answer, or an
 * async generator yielding text chunks (each becomes an `amf.result.partial`; the final result is
 * their concatenation unless the generator returns a result of its own).
 */
import type { ChatMessage, Usage } from '../events/payloads.js';
import type { TaskTools } from '../mcpClient/taskTools.js';
import { AmfError } from '../errors.js';
import type { HandlerMcpSurface } from './handlerMcp.js';

export type { TaskTools };
export type * from './handlerMcp.js';

/** A message the requester sent to a task that asked for input (A2A: a message with the task's id). */
export interface FollowUpMessage {
  text: string;
  data?: Record<string, unknown>;
  /** The A2A message id, when the message came over A2A. */
  messageId?: string;
}

export interface TaskContext {
  taskId: string;
  /** The id of the A2A message that started the task (absent for OpenAI, MCP and plain mesh tasks). */
  messageId?: string;
  traceId: string;
  /** The capability tag the task was announced for. */
  tag: string;
  /** The task text (for chat requests: the last user message). */
  text: string;
  /** The whole conversation for chat requests, else one user message. */
  messages: ChatMessage[];
  input?: Record<string, unknown>;
  /** The requester asked for streamed chunks. */
  stream: boolean;
  attempt: number;
  /** Aborted when the task is cancelled or the worker shuts down hard. */
  signal: AbortSignal;
  /** Publishes `amf.task.progress` (keeps the coordinator's watchdog informed on long tasks). */
  progress(message: string, percent?: number): void;
  /** Delegates a sub-task to another capability through the coordinator and waits for its result. */
  delegate(
    tag: string,
    text: string,
    options?: { timeoutMs?: number; input?: Record<string, unknown> },
  ): Promise<string>;
  /** MCP tools of the worker's configured servers; absent when the worker has none configured. */
  tools?: TaskTools;
  /**
   * Asks the requester for more input and waits for it: the task goes `input-required` (A2A) and
   * `amf.task.blocked` is published with `prompt` as the reason; the requester's next message to the
   * task resolves it. Rejects with HandlerError `input_not_supported` when the task came through a
   * protocol that cannot send follow-ups (OpenAI, MCP, POST /tasks/send). Aborting the task rejects it.
   */
  requestInput(prompt: string): Promise<FollowUpMessage>;
}

/** One part of a result artifact: text, structured data, or a file (inline base64 bytes or a URL). */
export type ArtifactPart =
  | { text: string }
  | { data: Record<string, unknown> }
  | { file: { name?: string; mediaType?: string; bytes?: string; uri?: string } };

/** An artifact a handler returns besides its answer text (A2A: one artifact each). */
export interface ResultArtifact {
  name?: string;
  description?: string;
  parts: ArtifactPart[];
}

export interface HandlerResult {
  text: string;
  data?: Record<string, unknown>;
  /** 0..1, published as `amfconfidence`. */
  confidence?: number;
  usage?: Usage;
  /** Further artifacts (A2A: text, file and data artifacts of the task, after the `result` one). */
  artifacts?: ResultArtifact[];
  /**
   * `message`: over A2A the answer is a Message (the `text`), not a Task, when nothing of the task
   * was shown yet; otherwise it is the completed task's status message. Other protocols ignore it.
   */
  respondWith?: 'message';
}

export type TaskHandler = (
  ctx: TaskContext,
) =>
  | Promise<string | HandlerResult>
  | AsyncIterable<string>
  | AsyncGenerator<string, string | HandlerResult | void>;

/** A handler with what the agent card and MCP tool listing say about it. */
export interface WorkerHandler {
  name: string;
  description: string;
  handle: TaskHandler;
  /**
   * JSON Schema (type "object") of the handler's MCP tool arguments. Absent: `{text: string}`, and
   * the task text is `text`; present: the text is `text` when it is a string, else the JSON of the
   * arguments, and `ctx.input` holds the arguments either way.
   */
  inputSchema?: { type: 'object'; properties?: Record<string, unknown>; required?: string[] };
  /**
   * The handler only reads (no side effects on the world): the agent card says `x-amf.read_only`, so
   * AMP callers with `read-only` trust may reach it. Default false: unknown handlers are not trusted.
   */
  readOnly?: boolean;
  /** More MCP tools, resources, prompts and completions served on the worker's `/mcp`. */
  mcp?: HandlerMcpSurface;
}

/**
 * Error a handler throws to fail a task with a stable code of its own choosing. Handlers name codes
 * freely, so the handler's code is `reason` (it becomes the task failure's code); as an AmfError the
 * failure is a TASK_FAILED.
 */
export class HandlerError extends AmfError {
  constructor(
    readonly reason: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super('TASK_FAILED', message, undefined, options);
    this.name = 'HandlerError';
  }
}

/**
 * Error a handler throws to refuse a task outright (A2A: the task ends `rejected`, not `failed`).
 * On the mesh it is a failed final with error code `rejected`.
 */
export class TaskRejectedError extends HandlerError {
  constructor(message: string, options?: ErrorOptions) {
    super(REJECTED_CODE, message, options);
    this.name = 'TaskRejectedError';
  }
}

/** The failure code of a rejected task. */
export const REJECTED_CODE = 'rejected';

/** What a value is, for a message about a wrong return: a type, never the value (it may be secret). */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/**
 * Normalises what a handler returned; a value that is no answer (a number, an object without a
 * string `text`, ...) is a HandlerError `invalid_result` that says what was expected, for the client
 * and the worker's log alike.
 */
export function toHandlerResult(value: unknown, streamed: string): HandlerResult {
  if (value === undefined) return { text: streamed };
  if (typeof value === 'string') return { text: value };
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new HandlerError(
      'invalid_result',
      `the handler returned ${kindOf(value)}: return a string, or { text: string, data?: object }`,
    );
  const result = value as Record<string, unknown>;
  if (typeof result.text !== 'string')
    throw new HandlerError(
      'invalid_result',
      `the handler returned an object whose "text" is ${result.text === undefined ? 'missing' : kindOf(result.text)}: ` +
        'return { text: string, data?: object }',
    );
  if (
    result.data !== undefined &&
    (typeof result.data !== 'object' || result.data === null || Array.isArray(result.data))
  )
    throw new HandlerError(
      'invalid_result',
      `the handler's "data" is ${kindOf(result.data)}: it must be an object`,
    );
  return value as HandlerResult;
}

/** True when a handler returned an async iterable (streaming handler). */
export function isAsyncIterable(value: unknown): value is AsyncIterable<string> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}
