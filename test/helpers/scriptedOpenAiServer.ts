/**
 * A local stand-in for a hosted OpenAI-compatible model: a real HTTP server on 127.0.0.1 speaking
 * the Chat Completions wire protocol, replaying scripted replies and recording what it was sent.
 *
 * ```ts
 * const llm = await startScriptedOpenAiServer({
 *   script: [
 *     { toolCalls: [{ name: 'math__add', arguments: { a: 2, b: 3 } }] },   // 1st call: a tool call
 *     (req) => ({ text: `the tool said ${lastToolResult(req)}` }),          // 2nd call: computed
 *   ],
 *   apiKey: 'sk-test',            // optional: other keys get 401 (invalid_api_key)
 *   repeatLast: false,            // true: a looping model that repeats its last step forever
 * });
 * // configure the agent with model { provider: openai, url: llm.url, name: 'any' } and key sk-test
 * llm.modelCalls()[0].body.messages  // what the agent sent (system prompt, history, tools, ...)
 * await llm.close();
 * ```
 *
 * Served: `POST /v1/chat/completions` (non-streamed, and with `stream: true` as SSE
 * `chat.completion.chunk`s: a role delta, content fragments, tool calls as `tool_calls` deltas by
 * index — id and name first, then argument fragments —, a finish chunk, a usage chunk when
 * `stream_options.include_usage`, then `data: [DONE]`) and `GET /v1/models`. Errors use OpenAI's
 * shape `{error: {message, type, param, code}}`. A used-up script answers 500.
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
  if (status === 401) return 'invalid_request_error';
  if (status === 429) return 'rate_limit_exceeded';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

function sendError(res: ServerResponse, status: number, message: string, code: string | null = null): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type: errorType(status), param: null, code } }));
}

let counter = 0;

function reply(req: RecordedRequest, res: ServerResponse, r: ScriptedReply): void {
  if (r.status !== undefined) return sendError(res, r.status, r.errorMessage ?? `scripted error ${r.status}`);
  const id = `chatcmpl-${++counter}`;
  const created = Math.floor(Date.now() / 1000);
  const model = typeof req.body?.model === 'string' ? req.body.model : 'scripted';
  const text = r.text ?? '';
  const calls = (r.toolCalls ?? []).map((c, i) => ({
    id: c.id ?? `call_${counter}_${i}`,
    name: c.name,
    args: argumentsText(c.arguments),
  }));
  const finish = r.finishReason ?? (calls.length > 0 ? 'tool_calls' : 'stop');
  const usage = {
    prompt_tokens: r.usage?.input ?? 10,
    completion_tokens: r.usage?.output ?? 5,
    total_tokens: (r.usage?.input ?? 10) + (r.usage?.output ?? 5),
  };
  if (req.body?.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: calls.length > 0 && text === '' ? null : text,
              refusal: null,
              ...(calls.length > 0
                ? {
                    tool_calls: calls.map((c) => ({
                      id: c.id,
                      type: 'function',
                      function: { name: c.name, arguments: c.args },
                    })),
                  }
                : {}),
            },
            logprobs: null,
            finish_reason: finish,
          },
        ],
        usage,
      }),
    );
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null): void =>
    writeSse(res, {
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    });
  chunk({ role: 'assistant', content: '' });
  for (const piece of fragments(text, r.chunkSize)) {
    chunk({ content: piece });
    if (r.cutStream) return void res.write('', () => res.socket?.destroy());
  }
  calls.forEach((c, i) => {
    const index = r.sameToolIndex ? 0 : i;
    chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] });
    for (const piece of fragments(c.args, r.chunkSize))
      chunk({ tool_calls: [{ index, function: { arguments: piece } }] });
  });
  chunk({}, finish);
  if (req.body?.stream_options?.include_usage === true)
    writeSse(res, { id, object: 'chat.completion.chunk', created, model, choices: [], usage });
  writeSse(res, '[DONE]');
  res.end();
}

/** Starts the scripted OpenAI-compatible server; `url` ends in `/v1`. */
export function startScriptedOpenAiServer(options: ScriptedServerOptions = {}): Promise<ScriptedServer> {
  return startScriptedServer(options, '/v1/chat/completions', '/v1', (req, res, nextReply) => {
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      sendError(res, 401, 'Incorrect API key provided.', 'invalid_api_key');
      return;
    }
    if (req.method === 'GET' && req.path === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          object: 'list',
          data: [{ id: 'scripted', object: 'model', created: 0, owned_by: 'test' }],
        }),
      );
      return;
    }
    if (req.method !== 'POST' || req.path !== '/v1/chat/completions') return false;
    if (!req.body || !Array.isArray(req.body.messages) || typeof req.body.model !== 'string') {
      sendError(res, 400, "'model' and 'messages' are required");
      return;
    }
    reply(req, res, nextReply());
  });
}

/** The content of the last `tool` message of a recorded request (what the agent fed back). */
export function lastToolResult(req: RecordedRequest): string | undefined {
  const messages = (req.body?.messages ?? []) as { role: string; content: unknown }[];
  const tool = [...messages].reverse().find((m) => m.role === 'tool');
  return typeof tool?.content === 'string' ? tool.content : undefined;
}
