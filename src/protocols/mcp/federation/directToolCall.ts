/**
 * The federation's `tools/call` to an agent without the SDK client's request machinery (issue 14):
 * one JSON-RPC POST in the shared client's session (its session id and negotiated protocol
 * revision), over the agent's own connections, pin and headers (callAuth.ts), the answer parsed as
 * it arrives. The SDK client parsed every message in and out with zod and built web
 * Request/Response objects for each call; that was most of the coordinator's CPU per proxied call.
 *
 * Messages in the answer other than the call's response (log messages, list changes, a request of
 * the agent) are handed to the shared client's transport as soon as they arrive, so the client
 * handles them as if it had read them itself: a request such as `sampling/createMessage`, which the
 * shared client does not offer, is answered at once (-32601) and the agent's tool fails fast
 * instead of waiting for the time limit. An SSE answer that ends before the response (the agent
 * closed it to make the client poll, SEP-1699) is resumed with `GET` and `Last-Event-ID`. Calls
 * that need progress or their own connection keep the SDK client.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ErrorCode,
  McpError,
  type CallToolResult,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import { Readable } from 'node:stream';
import type { AgentFetch, RawAnswer } from './callAuth.js';
import { AmfError, toAmfError } from '../../../errors.js';

/** What one direct call needs. */
export interface DirectCall {
  client: Client;
  fetch: AgentFetch;
  endpoint: string;
  tool: string;
  args: Record<string, unknown>;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** The request's `_meta` (who the caller is). */
  meta?: Record<string, unknown>;
}

let nextId = 0;

/**
 * The agent's result of the call, or undefined when the shared client has no session to call in
 * (the caller then uses the SDK client). Throws McpError for the agent's JSON-RPC error, Error for
 * HTTP and transport failures.
 */
export async function callToolDirect(call: DirectCall): Promise<CallToolResult | undefined> {
  const transport = call.client.transport as StreamableHTTPClientTransport | undefined;
  const sessionId = transport?.sessionId;
  if (!transport || sessionId === undefined) return undefined;
  // A string id of our own: it cannot collide with the SDK client's numeric ids in the same session.
  const id = `amf-direct-${++nextId}`;
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name: call.tool, arguments: call.args, ...(call.meta ? { _meta: call.meta } : {}) },
  });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-session-id': sessionId,
  };
  if (transport.protocolVersion) headers['mcp-protocol-version'] = transport.protocolVersion;
  // A timer cleared when the call ends (AbortSignal.timeout would keep one per call for the whole
  // time limit), and the caller's signal followed while the call runs.
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
  }, call.timeoutMs);
  const follow = () => abort.abort(call.signal?.reason);
  if (call.signal?.aborted) follow();
  else call.signal?.addEventListener('abort', follow, { once: true });
  const state: Answer = { response: undefined, lastEventId: undefined, retryMs: undefined };
  // Once the response is in, the rest of the answer is read to its end (the socket then goes back
  // to the pool), but not for long: a server may keep the stream open after the response.
  let grace: NodeJS.Timeout | undefined;
  state.onResponse = () => {
    grace = setTimeout(() => abort.abort(), RESPONSE_GRACE_MS);
  };
  try {
    const answer = await call.fetch.post(call.endpoint, headers, body, abort.signal);
    if (answer.status === 404) {
      // The agent ended the session (restart, idle expiry): a new client connects on the next call.
      void call.client.close().catch(() => undefined);
      throw new AmfError(
        'UNAVAILABLE',
        `the agent's MCP session ended (HTTP 404); the next call opens a new one`,
      );
    }
    if (answer.status < 200 || answer.status >= 300) {
      const text = (await readAll(answer.body, 300)).toString('utf8');
      throw new AmfError('TASK_FAILED', `HTTP ${answer.status} from the agent: ${text}`);
    }
    await readAnswer(answer, id, transport, state);
    // An SSE answer that ended early: resume it where it stopped, as often as the agent ends it.
    for (let resumes = 0; !state.response && state.lastEventId !== undefined; resumes++) {
      if (resumes >= MAX_RESUMES)
        throw new AmfError('UNAVAILABLE', `the agent ended the answer stream ${MAX_RESUMES} times`);
      await sleep(Math.min(state.retryMs ?? 0, MAX_RESUME_DELAY_MS), abort.signal);
      const resumed = await call.fetch.fetch(call.endpoint, {
        method: 'GET',
        headers: { ...headers, accept: 'text/event-stream', 'last-event-id': state.lastEventId },
        signal: abort.signal,
      });
      if (!resumed.ok || !resumed.body)
        throw new AmfError(
          'TASK_FAILED',
          `HTTP ${resumed.status} from the agent when resuming the answer stream`,
        );
      const before = state.lastEventId;
      await readAnswer(
        {
          status: resumed.status,
          contentType: resumed.headers.get('content-type') ?? '',
          body: resumed.body,
        },
        id,
        transport,
        state,
      );
      if (state.lastEventId === before && !state.response) break;
    }
  } catch (err) {
    // After the response, only the end of its stream failed (or was cut short): nothing is lost.
    if (!state.response) {
      if (timedOut)
        throw new McpError(ErrorCode.RequestTimeout, `Request timed out after ${call.timeoutMs} ms`);
      throw err;
    }
  } finally {
    clearTimeout(timer);
    clearTimeout(grace);
    call.signal?.removeEventListener('abort', follow);
    // An answer given up on is not read further.
    if (!state.response) abort.abort();
  }
  const response = state.response;
  if (!response) throw new AmfError('TASK_FAILED', 'the agent answered without a response to the call');
  if (isObject(response.error)) {
    const { code, message, data } = response.error;
    throw new McpError(typeof code === 'number' ? code : -32603, String(message ?? 'error'), data);
  }
  const result = response.result;
  if (!isObject(result) || (result.content !== undefined && !Array.isArray(result.content)))
    throw new AmfError('TASK_FAILED', 'the agent answered tools/call with a malformed result');
  return { ...result, content: (result.content ?? []) as CallToolResult['content'] } as CallToolResult;
}

/** Largest answer read: far above the 1 MiB arguments the policy lets through. */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;
/** How long the rest of an answer stream is read once its response is in. */
const RESPONSE_GRACE_MS = 1000;
/** How often an answer stream the agent ends early is resumed. */
const MAX_RESUMES = 100;
/** Longest wait before a resume, whatever `retry` the agent asks for (the time limit still applies). */
const MAX_RESUME_DELAY_MS = 5000;

/** What the answer of one call brought so far. */
interface Answer {
  response: Record<string, unknown> | undefined;
  lastEventId: string | undefined;
  retryMs: number | undefined;
  /** Called once, when the response arrives. */
  onResponse?: () => void;
}

/**
 * Reads one answer to its end: a JSON body, or an SSE stream whose events are handled as they
 * arrive. The call's response is kept in `state`; other messages go to the shared client's
 * transport. (Leaving a body unread would close its connection rather than reuse it.)
 */
async function readAnswer(
  answer: RawAnswer,
  id: string,
  transport: StreamableHTTPClientTransport,
  state: Answer,
): Promise<void> {
  const take = (message: unknown): void => {
    if (isObject(message) && message.id === id && !('method' in message)) {
      if (state.response) return;
      state.response = message;
      state.onResponse?.();
    } else transport.onmessage?.(message as JSONRPCMessage);
  };
  if (!answer.contentType.toLowerCase().startsWith('text/event-stream')) {
    const parsed: unknown = JSON.parse((await readAll(answer.body, MAX_ANSWER_BYTES)).toString('utf8'));
    for (const message of Array.isArray(parsed) ? parsed : [parsed]) take(message);
    return;
  }
  const decoder = new TextDecoder();
  let pending = '';
  let size = 0;
  for await (const chunk of answer.body) {
    size += chunk.byteLength;
    if (size > MAX_ANSWER_BYTES)
      throw new AmfError('PAYLOAD_TOO_LARGE', `the agent's answer is larger than ${MAX_ANSWER_BYTES} bytes`);
    pending += decoder.decode(chunk, { stream: true });
    for (;;) {
      const end = /\r?\n\r?\n/.exec(pending);
      if (!end) break;
      const event = pending.slice(0, end.index);
      pending = pending.slice(end.index + end[0].length);
      const data: string[] = [];
      for (const line of event.split(/\r?\n/)) {
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + (line[colon + 1] === ' ' ? 2 : 1));
        if (field === 'data') data.push(value);
        else if (field === 'id') state.lastEventId = value;
        else if (field === 'retry' && /^\d+$/.test(value)) state.retryMs = Number(value);
      }
      // Events without data (a priming event with only an id) carry no message.
      if (data.length > 0 && data.join('') !== '') take(JSON.parse(data.join('\n')));
    }
  }
}

/** The whole of `body`, refused beyond `max` bytes. */
async function readAll(body: AsyncIterable<Uint8Array>, max: number): Promise<Buffer> {
  if (body instanceof Readable) return readStream(body, max);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > max) {
      if (max < MAX_ANSWER_BYTES) break;
      throw new AmfError('PAYLOAD_TOO_LARGE', `the agent's answer is larger than ${max} bytes`);
    }
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).subarray(0, max);
}

/**
 * readAll of a node stream (the agent's answer over node:http), by its events: the async iterator
 * took several turns of promises per answer, on the caller's wait for every JSON answer.
 */
function readStream(body: Readable, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err?: unknown) => {
      body.off('data', onData).off('end', onEnd).off('error', done).off('close', onClose);
      if (err !== undefined) reject(err instanceof Error ? err : toAmfError(err));
      else resolve(Buffer.concat(chunks).subarray(0, max));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      chunks.push(chunk);
      if (size <= max) return;
      if (max < MAX_ANSWER_BYTES) {
        body.destroy();
        done();
      } else {
        body.destroy();
        done(new AmfError('PAYLOAD_TOO_LARGE', `the agent's answer is larger than ${max} bytes`));
      }
    };
    const onEnd = () => done();
    // Closed before its end: the connection was cut (or the call aborted) mid-answer.
    const onClose = () => done(body.errored ?? new AmfError('UNAVAILABLE', 'the answer was cut short'));
    body.on('data', onData).once('end', onEnd).once('error', done).once('close', onClose);
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason instanceof Error ? signal.reason : new AmfError('UNAVAILABLE', 'aborted'));
      },
      { once: true },
    );
  });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
