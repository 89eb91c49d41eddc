/**
 * A local stand-in for the Anthropic API: a real HTTP server on 127.0.0.1 speaking the Messages wire
 * protocol, replaying scripted replies and recording what it was sent. Same script API as
 * scriptedOpenAiServer.ts:
 *
 * ```ts
 * const llm = await startScriptedAnthropicServer({
 *   script: [{ toolCalls: [{ name: 'math__add', arguments: { a: 2, b: 3 } }] }, { text: '5' }],
 *   apiKey: 'sk-ant-test',        // optional: other keys get 401 authentication_error
 * });
 * // model { provider: anthropic, url: llm.url, name: 'claude-test' } with key sk-ant-test
 * llm.modelCalls()[1].body.messages  // the tool_result block the agent sent back
 * ```
 *
 * Served: `POST /v1/messages`. Non-streamed answers are a `message` with `text` and `tool_use`
 * content blocks and a `stop_reason` (`end_turn`, `tool_use`, ...). With `stream: true`, the SSE
 * events Anthropic sends: `message_start`, `content_block_start` (text, or tool_use with empty
 * input), `ping`, `content_block_delta` (`text_delta` / `input_json_delta` fragments),
 * `content_block_stop`, `message_delta` (stop_reason, usage), `message_stop`. The key is accepted in
 * `x-api-key` or `Authorization: Bearer`. Errors use Anthropic's shape
 * `{type: "error", error: {type, message}}`; a request without `max_tokens` is refused with 400 as
 * the real API does.
 */
import type { ServerResponse } from 'node:http';
import {
  argumentsText,
  fragments,
  startScriptedServer,
  writeSse,
  type RecordedRequest,
  type ScriptedReply,
  type ScriptedServer,
  type ScriptedServerOptions,
} from './scriptedServerBase.js';

export type {
  RecordedRequest,
  ScriptedReply,
  ScriptedServer,
  ScriptedServerOptions,
  ScriptedToolCall,
  ScriptStep,
} from './scriptedServerBase.js';

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

function sendError(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ type: 'error', error: { type: errorType(status), message } }));
}

let counter = 0;

function reply(req: RecordedRequest, res: ServerResponse, r: ScriptedReply): void {
  if (r.status !== undefined) return sendError(res, r.status, r.errorMessage ?? `scripted error ${r.status}`);
  const id = `msg_${++counter}`;
  const model = typeof req.body?.model === 'string' ? req.body.model : 'scripted';
  const text = r.text ?? '';
  const calls = (r.toolCalls ?? []).map((c, i) => ({
    id: c.id ?? `toolu_${counter}_${i}`,
    name: c.name,
    args: argumentsText(c.arguments),
  }));
  const stopReason = r.finishReason ?? (calls.length > 0 ? 'tool_use' : 'end_turn');
  const usage = { input_tokens: r.usage?.input ?? 10, output_tokens: r.usage?.output ?? 5 };
  if (req.body?.stream !== true) {
    const content: Record<string, unknown>[] = [];
    if (text) content.push({ type: 'text', text });
    for (const c of calls)
      content.push({ type: 'tool_use', id: c.id, name: c.name, input: JSON.parse(c.args) });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id,
        type: 'message',
        role: 'assistant',
        model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        usage,
      }),
    );
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (event: string, data: Record<string, unknown>): void =>
    writeSse(res, { type: event, ...data }, event);
  send('message_start', {
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: usage.input_tokens, output_tokens: 1 },
    },
  });
  let index = 0;
  if (text) {
    send('content_block_start', { index, content_block: { type: 'text', text: '' } });
    send('ping', {});
    for (const piece of fragments(text, r.chunkSize)) {
      send('content_block_delta', { index, delta: { type: 'text_delta', text: piece } });
      if (r.cutStream) return void res.write('', () => res.socket?.destroy());
    }
    send('content_block_stop', { index });
    index++;
  }
  for (const c of calls) {
    send('content_block_start', {
      index,
      content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} },
    });
    for (const piece of fragments(c.args, r.chunkSize))
      send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
    send('content_block_stop', { index });
    index++;
  }
  send('message_delta', {
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: usage.output_tokens },
  });
  send('message_stop', {});
  res.end();
}

/** Starts the scripted Anthropic server; `url` is the origin (the SDK adds `/v1/messages`). */
export function startScriptedAnthropicServer(options: ScriptedServerOptions = {}): Promise<ScriptedServer> {
  return startScriptedServer(options, '/v1/messages', '', (req, res, nextReply) => {
    if (options.apiKey !== undefined) {
      const key = req.headers['x-api-key'] ?? req.headers.authorization?.replace(/^Bearer /, '');
      if (key !== options.apiKey) {
        sendError(res, 401, 'invalid x-api-key');
        return;
      }
    }
    if (req.method !== 'POST' || req.path !== '/v1/messages') return false;
    if (!req.body || !Array.isArray(req.body.messages) || typeof req.body.model !== 'string') {
      sendError(res, 400, 'model: Field required; messages: Field required');
      return;
    }
    if (typeof req.body.max_tokens !== 'number') {
      sendError(res, 400, 'max_tokens: Field required');
      return;
    }
    reply(req, res, nextReply());
  });
}

/** The text of the last `tool_result` block of a recorded request (what the agent fed back). */
export function lastToolResult(req: RecordedRequest): string | undefined {
  const messages = (req.body?.messages ?? []) as { role: string; content: unknown }[];
  for (const m of [...messages].reverse()) {
    if (!Array.isArray(m.content)) continue;
    const block = [...(m.content as { type: string; content?: unknown }[])]
      .reverse()
      .find((b) => b.type === 'tool_result');
    if (block) return typeof block.content === 'string' ? block.content : JSON.stringify(block.content);
  }
  return undefined;
}
