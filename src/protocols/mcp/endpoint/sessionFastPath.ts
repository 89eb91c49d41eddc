/**
 * A request of a live MCP session answered without the SDK's server transport (issue 14): the host
 * (protocols/mcp/federation/endpoint.ts) may take a plain JSON-RPC request, such as a federated
 * `tools/call`, and answer it with one `application/json` body (Streamable HTTP allows it for any
 * POST). Only a request the SDK transport would accept as it is qualifies: one message with an id,
 * both media types accepted, a JSON body, a supported `MCP-Protocol-Version`. Everything else, and
 * every request the host declines, takes the SDK path unchanged.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';

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

/** Writes the answer of `request` as one JSON body (the session id echoed, as the SDK does). */
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
  const body = JSON.stringify({ jsonrpc: '2.0', id: request.id, ...answer });
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'mcp-session-id': sessionId,
  });
  res.end(body);
}
