/**
 * OpenAI-compatible edge: `GET /v1/models` lists `amf/<tag>` for every tag a live agent serves, and
 * `POST /v1/chat/completions` turns a chat request into a mesh task for that tag, answered in
 * OpenAI's shapes (streaming chunks with one id, role delta first, finish_reason, usage, [DONE]) and
 * OpenAI's error format.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AmfError, toAmfError } from '../../errors.js';
import type { ChatMessage, Usage } from '../../events/payloads.js';
import { isCapabilityTag } from '../../events/subjects.js';
import { bodyValidator } from '../../http/bodyValidator.js';
import { readBody, sendJson } from '../../http/httpKit.js';
import { httpStatusFor, openAiErrorBody } from '../../http/wireErrors.js';
import { stoppingError, type TaskResult, type TaskService } from '../../coordinator/tasks/taskService.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import { CHAT_REQUEST_SCHEMA, type ChatCompletionBody } from './chatRequestSchema.js';

export interface OpenAiOptions {
  tasks: Pick<TaskService, 'submit' | 'updates' | 'abandon'>;
  agents: AgentDirectory;
  requestTimeoutMs: number;
  maxBodyBytes: number;
  ttlSeconds?: number;
  /** Told of each request refused because no agent serves its model (the console shows them). */
  onUnknownModel?: (model: string, message: string) => void;
  /**
   * Asked once before a model is refused because no live agent here serves its tag: a coordinator
   * back from a partition still has its agents marked offline, while the shared registry knows them
   * live (coordinator/sharedLiveness.ts). Resolves whether the tag is served now.
   */
  confirmTag?: (tag: string) => Promise<boolean>;
  /**
   * Why a model nobody serves is refused for another reason than its absence, if so: while the
   * fabric is unreachable or frozen no agent looks live (503), while its store is full nothing new
   * is taken (507) (coordinator/fabricCondition.ts).
   */
  refuseUnserved?: () => AmfError | undefined;
  /**
   * Aborted when the edge is stopping: a request still waiting is answered at once, a stream with
   * an error chunk and `[DONE]` (stopped as OpenAI ends a stream that failed), not cut off.
   */
  stopping?: AbortSignal;
}

/**
 * Runs `onStop` if `signal` aborts before the returned function is called (or at once when it
 * already has); the returned function stops listening.
 */
function whenStopping(signal: AbortSignal | undefined, onStop: () => void): () => void {
  if (!signal) return () => undefined;
  if (signal.aborted) {
    onStop();
    return () => undefined;
  }
  signal.addEventListener('abort', onStop, { once: true });
  return () => signal.removeEventListener('abort', onStop);
}

const MODEL_PREFIX = 'amf/';

/** Sends an error in OpenAI's shape: `{error: {message, type, param, code}}`. */
export function sendOpenAiError(res: ServerResponse, err: unknown, param: string | null = null): void {
  const e = toAmfError(err);
  sendJson(res, httpStatusFor(e.code), openAiErrorBody(e, param));
}

interface ParsedRequest {
  model: string;
  tag: string;
  messages: ChatMessage[];
  text: string;
  stream: boolean;
  includeUsage: boolean;
}

function invalid(message: string, param: string): AmfError {
  return new AmfError('INVALID_REQUEST', message, { param });
}

const checkChatBody = bodyValidator<ChatCompletionBody>(CHAT_REQUEST_SCHEMA);

/**
 * Validates a chat completion request body: its structure by the schema (chatRequestSchema.ts),
 * then what only code knows (model naming, a live agent for the tag). Every error names the
 * offending parameter.
 */
export function parseChatRequest(body: unknown, agents: AgentDirectory): ParsedRequest {
  const checked = checkChatBody(body);
  if (!checked.ok) throw invalid(checked.problem.message, checked.problem.param);
  const b = checked.value;
  const model = b.model;
  if (!model.startsWith(MODEL_PREFIX) || !isCapabilityTag(model.slice(MODEL_PREFIX.length)))
    throw new AmfError(
      'NO_AGENT_FOR_TAG',
      `The model \`${model.slice(0, 200)}\` does not exist: AMF models are named amf/<capability-tag>`,
      {
        param: 'model',
      },
    );
  const tag = model.slice(MODEL_PREFIX.length);
  const messages: ChatMessage[] = b.messages.map((m) => ({
    role: m.role === 'developer' ? 'system' : m.role,
    content: typeof m.content === 'string' ? m.content : (m.content ?? []).map((part) => part.text).join(''),
  }));
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const text = (lastUser ?? messages[messages.length - 1]!).content;
  if (!agents.servesTag(tag))
    throw new AmfError(
      'NO_AGENT_FOR_TAG',
      `The model \`${model}\` does not exist: no live agent serves capability "${tag}"`,
      {
        param: 'model',
      },
    );
  return {
    model,
    tag,
    messages,
    text,
    stream: b.stream === true,
    includeUsage: b.stream_options?.include_usage === true,
  };
}

/**
 * {@link parseChatRequest}; when no live agent serves the model, the shared view is asked first
 * (`confirmTag`), and the request parsed again if it revived one.
 */
async function parseServedRequest(body: unknown, opts: OpenAiOptions): Promise<ParsedRequest> {
  try {
    return parseChatRequest(body, opts.agents);
  } catch (err) {
    const model = (body as { model?: unknown } | null)?.model;
    const tag =
      typeof model === 'string' && model.startsWith(MODEL_PREFIX) ? model.slice(MODEL_PREFIX.length) : '';
    const unserved = err instanceof AmfError && err.code === 'NO_AGENT_FOR_TAG' && isCapabilityTag(tag);
    const refusal = unserved ? opts.refuseUnserved?.() : undefined;
    if (refusal) throw refusal;
    if (!unserved || !opts.confirmTag || !(await opts.confirmTag(tag).catch(() => false))) throw err;
    return parseChatRequest(body, opts.agents);
  }
}

/** Rough token estimate (4 characters a token) used when a worker reports no usage. */
function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

function usageOf(req: ParsedRequest, result: TaskResult): Usage & { total_tokens: number } {
  const prompt = result.usage?.prompt_tokens ?? estimateTokens(req.messages.map((m) => m.content).join('\n'));
  const completion = result.usage?.completion_tokens ?? estimateTokens(result.text);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** `GET /v1/models`. */
export function listModels(agents: AgentDirectory): Record<string, unknown> {
  const created = Math.floor(Date.now() / 1000);
  return {
    object: 'list',
    data: [...agents.liveTags().keys()]
      .sort()
      .map((tag) => ({ id: MODEL_PREFIX + tag, object: 'model', created, owned_by: 'amf-mesh' })),
  };
}

/** The model a NO_AGENT_FOR_TAG error names (its message quotes it in backticks). */
function modelOf(err: AmfError): string {
  return /`([^`]*)`/.exec(err.message)?.[1] ?? 'an unknown model';
}

/** `POST /v1/chat/completions`. */
export async function handleChatCompletion(
  req: IncomingMessage,
  res: ServerResponse,
  opts: OpenAiOptions,
): Promise<void> {
  let parsed: ParsedRequest;
  try {
    const raw = await readBody(req, opts.maxBodyBytes);
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw invalid(`request body is not valid JSON: ${(err as Error).message}`, 'body');
    }
    parsed = await parseServedRequest(body, opts);
  } catch (err) {
    if (err instanceof AmfError && err.code === 'NO_AGENT_FOR_TAG' && opts.onUnknownModel)
      opts.onUnknownModel(modelOf(err), err.message);
    sendOpenAiError(res, err);
    return;
  }
  const created = Math.floor(Date.now() / 1000);
  if (!parsed.stream) {
    let id = '';
    let taskId = '';
    // A client that hangs up cancels its task (no AbortController per request: it showed in the
    // mesh's CPU profile, docs/performance.md).
    res.once('close', () => {
      if (!res.writableFinished && taskId) opts.tasks.abandon(taskId);
    });
    // The task itself is ended by the coordinator as it stops (every task ends in one event).
    const unlisten = whenStopping(opts.stopping, () => {
      if (!res.headersSent) sendOpenAiError(res, stoppingError(taskId));
    });
    try {
      const result = await opts.tasks.submit({
        tag: parsed.tag,
        task: parsed.text,
        messages: parsed.messages,
        timeoutMs: opts.requestTimeoutMs,
        ...(opts.ttlSeconds !== undefined ? { ttlSeconds: opts.ttlSeconds } : {}),
        onAnnounced: (announced) => {
          taskId = announced;
          id = `chatcmpl-${announced}`;
        },
      });
      // Answered already: the coordinator stopped while the task ran.
      if (res.headersSent) return;
      sendJson(
        res,
        200,
        {
          id,
          object: 'chat.completion',
          created,
          model: parsed.model,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: result.text, refusal: null },
              logprobs: null,
              finish_reason: 'stop',
            },
          ],
          usage: usageOf(parsed, result),
          system_fingerprint: null,
        },
        {
          'x-amf-task-id': result.taskId,
          'x-amf-trace-id': result.traceId,
          'x-amf-agent-id': result.agentId,
        },
      );
    } catch (err) {
      if (!res.headersSent) sendOpenAiError(res, err);
    } finally {
      unlisten();
    }
    return;
  }
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  await streamCompletion(res, parsed, opts, controller.signal, created);
}

async function streamCompletion(
  res: ServerResponse,
  parsed: ParsedRequest,
  opts: OpenAiOptions,
  signal: AbortSignal,
  created: number,
): Promise<void> {
  let id = '';
  let taskId = '';
  let streamedText = '';
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
    `data: ${JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created,
      model: parsed.model,
      system_fingerprint: null,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    })}\n\n`;
  // Once the edge stops, the response is over: what the task does after that reaches nobody.
  const ended = () => res.writableEnded || res.destroyed;
  const unlisten = whenStopping(opts.stopping, () => {
    if (ended()) return;
    if (!res.headersSent) {
      sendOpenAiError(res, stoppingError(taskId));
      return;
    }
    res.write(`data: ${JSON.stringify(openAiErrorBody(stoppingError(taskId)))}\n\n`);
    res.end('data: [DONE]\n\n');
  });
  try {
    let result: TaskResult | undefined;
    const updates = opts.tasks.updates({
      tag: parsed.tag,
      task: parsed.text,
      messages: parsed.messages,
      stream: true,
      timeoutMs: opts.requestTimeoutMs,
      signal,
      ...(opts.ttlSeconds !== undefined ? { ttlSeconds: opts.ttlSeconds } : {}),
    });
    for await (const update of updates) {
      if (update.kind === 'announced') {
        taskId = update.taskId;
        // Headers go out only once the task exists, so "no such model" is still a plain 404.
        id = `chatcmpl-${taskId}`;
        if (res.headersSent || ended()) continue;
        res.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
          'x-amf-task-id': taskId,
          'x-amf-trace-id': update.traceId,
        });
        res.write(chunk({ role: 'assistant', content: '' }));
      } else if (update.kind === 'partial') {
        if (ended()) continue;
        streamedText += update.delta;
        res.write(chunk({ content: update.delta }));
      } else if (update.kind === 'result') result = update.result;
    }
    if (!result) return;
    if (ended()) return;
    // A worker that does not stream still answers a streaming request: its text becomes one chunk.
    if (result.text.length > 0 && streamedText.length === 0) res.write(chunk({ content: result.text }));
    res.write(chunk({}, 'stop'));
    if (parsed.includeUsage) {
      res.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: parsed.model, choices: [], usage: usageOf(parsed, result) })}\n\n`,
      );
    }
    res.end('data: [DONE]\n\n');
  } catch (err) {
    if (ended()) return;
    if (!res.headersSent) {
      sendOpenAiError(res, err);
      return;
    }
    res.write(`data: ${JSON.stringify(openAiErrorBody(toAmfError(err)))}\n\n`);
    res.end('data: [DONE]\n\n');
  } finally {
    unlisten();
  }
}
