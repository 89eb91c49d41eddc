/**
 * A request of a live MCP session answered without the SDK's server transport (issue 14): the host
 * (the coordinator's protocols/mcp/federation/endpoint.ts, a worker's protocols/mcp/worker/endpoint.ts)
 * may take a plain JSON-RPC request, such as a `tools/call`, and answer it with one
 * `application/json` body (Streamable HTTP allows it for any POST). Only a request the SDK transport
 * would accept as it is qualifies: one message with an id, both media types accepted, a JSON body, a
 * supported `MCP-Protocol-Version`. Everything else, and every request the host declines, takes the
 * SDK path unchanged. A host serves a plain `tools/call` through asPlainToolCall and answerCall,
 * which keep the SDK path's semantics (errors, cancellation).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import { ErrorCode, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';

/** A JSON-RPC request with an id, as the fast path sees it. */
export interface FastRequest {
  id: string | number;
  method: string;
  params?: Record<string, unknown>;
}

/** The answer of a fast request: its result, or a JSON-RPC error. */
export type FastAnswer = { result: unknown } | { error: { code: number; message: string; data?: unknown } };

/** The session a fast request belongs to. */
export interface FastSession {
  server: McpServer;
  sessionId: string;
}

/**
 * Serves `request` of `session`, or returns undefined to leave it to the SDK. `signal` aborts when
 * the caller goes away before the answer.
 */
export type FastRequestHandler = (
  session: FastSession,
  request: FastRequest,
  signal: AbortSignal,
) => Promise<FastAnswer> | undefined;

/** `body` as a fast request when `req` is one the SDK transport would accept unchanged. */
export function asFastRequest(req: IncomingMessage, body: unknown): FastRequest | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const m = body as Record<string, unknown>;
  if (m.jsonrpc !== '2.0' || typeof m.method !== 'string') return undefined;
  if (!(typeof m.id === 'string' || (typeof m.id === 'number' && Number.isInteger(m.id)))) return undefined;
  if (
    m.params !== undefined &&
    (typeof m.params !== 'object' || m.params === null || Array.isArray(m.params))
  )
    return undefined;
  const accept = req.headers.accept ?? '';
  if (!accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
  const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (contentType !== 'application/json') return undefined;
  const version = req.headers['mcp-protocol-version'];
  if (typeof version !== 'string' || !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) return undefined;
  return m as unknown as FastRequest;
}

/**
 * Writes the answer of `request` as one JSON body (the session id echoed, as the SDK does), or an
 * event stream without events for a call the client cancelled (answerCall).
 */
export async function answerFast(
  res: ServerResponse,
  sessionId: string,
  request: FastRequest,
  pending: Promise<FastAnswer>,
): Promise<void> {
  let answer: FastAnswer;
  try {
    answer = await pending;
  } catch (err) {
    answer = { error: { code: -32603, message: err instanceof Error ? err.message : String(err) } };
  }
  if (res.destroyed || res.writableEnded) return;
  if (answer === CANCELLED) {
    // No response, as the SDK sends none for a cancelled request: an event stream without events.
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'mcp-session-id': sessionId,
    });
    res.end();
    return;
  }
  const body = JSON.stringify({ jsonrpc: '2.0', id: request.id, ...answer });
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'mcp-session-id': sessionId,
  });
  res.end(body);
}

/** A `tools/call` with nothing but a tool name, its arguments and plain `_meta`. */
export interface PlainToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

const PLAIN_KEYS = new Set(['name', 'arguments', '_meta']);
/** The `_meta` key that ties a request to an MCP task (the SDK's RELATED_TASK_META_KEY). */
const RELATED_TASK_KEY = 'io.modelcontextprotocol/related-task';

/**
 * `request` as a plain `tools/call`, else undefined (the SDK path). A request with anything beyond a
 * name, arguments and `_meta` without a progress token or a related task (progress, tasks) is left
 * to the SDK handler, which also reports malformed params as it always has.
 */
export function asPlainToolCall(request: FastRequest): PlainToolCall | undefined {
  if (request.method !== 'tools/call') return undefined;
  const params = request.params;
  if (!params || typeof params.name !== 'string') return undefined;
  if (Object.keys(params).some((k) => !PLAIN_KEYS.has(k))) return undefined;
  const args = params.arguments;
  if (args !== undefined && !isPlainObject(args)) return undefined;
  const meta = params._meta;
  if (meta !== undefined && (!isPlainObject(meta) || 'progressToken' in meta || RELATED_TASK_KEY in meta))
    return undefined;
  return { name: params.name, arguments: args ?? {} };
}

/**
 * The answer of `request` of `session`, run by `call` as the SDK server would run its handler: a
 * thrown error becomes the JSON-RPC error the SDK's protocol layer would send, and the call's signal
 * aborts when `signal` does (the client went away, the endpoint stops) or when the client cancels
 * the request (`notifications/cancelled` in the session), after which no response is sent.
 */
export async function answerCall(
  session: FastSession,
  request: FastRequest,
  signal: AbortSignal,
  call: (signal: AbortSignal) => Promise<unknown>,
): Promise<FastAnswer> {
  const controller = new AbortController();
  const abort = () => controller.abort(signal.reason);
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  const calls = callsOf(session.server);
  calls?.set(request.id, controller);
  let cancelled = false;
  const onCancel = () => (cancelled = !signal.aborted);
  controller.signal.addEventListener('abort', onCancel, { once: true });
  try {
    const result = await call(controller.signal);
    return cancelled ? CANCELLED : { result };
  } catch (err) {
    return cancelled ? CANCELLED : { error: jsonRpcError(err) };
  } finally {
    signal.removeEventListener('abort', abort);
    controller.signal.removeEventListener('abort', onCancel);
    if (calls?.get(request.id) === controller) calls.delete(request.id);
  }
}

/** The answer of a call the client cancelled: answerFast sends no response for it. */
const CANCELLED: FastAnswer = Object.freeze({ result: undefined });

/** The fast calls in flight of each session's server, by request id (for `notifications/cancelled`). */
const inFlight = new WeakMap<McpServer, Map<string | number, AbortController>>();

/**
 * The fast calls of `server`, watching its transport for cancellations on first use. The SDK server
 * never sees a fast request, so it could not abort it; it still sees the notification after us.
 */
function callsOf(server: McpServer): Map<string | number, AbortController> | undefined {
  const known = inFlight.get(server);
  if (known) return known;
  const transport = server.transport;
  if (!transport) return undefined;
  const mine = new Map<string | number, AbortController>();
  inFlight.set(server, mine);
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const m = message as { method?: unknown; params?: { requestId?: unknown; reason?: unknown } };
    if (m.method === 'notifications/cancelled' && mine.size > 0) {
      const id = m.params?.requestId;
      if (typeof id === 'string' || typeof id === 'number') mine.get(id)?.abort(m.params?.reason);
    }
    deliver?.(message, extra);
  };
  return mine;
}

// As the SDK's protocol layer answers an error thrown by a request handler (McpError or not).
function jsonRpcError(err: unknown): { code: number; message: string; data?: unknown } {
  const e = (typeof err === 'object' && err !== null ? err : {}) as Record<string, unknown>;
  return {
    code: typeof e.code === 'number' && Number.isSafeInteger(e.code) ? e.code : ErrorCode.InternalError,
    message: typeof e.message === 'string' ? e.message : 'Internal error',
    ...(e.data !== undefined ? { data: e.data } : {}),
  };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
