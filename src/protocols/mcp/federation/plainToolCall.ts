/**
 * The fast path of a plain federated `tools/call` on a live session of the coordinator's `/mcp`
 * (protocols/mcp/endpoint/sessionFastPath.ts, issue 14): the same federation call as the SDK
 * server's handler (policy, audit, namespacing, forward), without the server transport's
 * per-message work. A request with anything beyond a name, arguments and `_meta` without a progress
 * token (progress, tasks) is left to the SDK handler, which also reports malformed params as it
 * always has.
 */
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { McpFederation, McpCaller } from './federation.js';
import type { FastAnswer, FastRequest } from '../endpoint/sessionFastPath.js';

const PLAIN_KEYS = new Set(['name', 'arguments', '_meta']);

/** The answer of `request` when it is a plain `tools/call`, else undefined (the SDK path). */
export function plainToolCall(
  federation: McpFederation,
  request: FastRequest,
  who: McpCaller,
  signal: AbortSignal,
): Promise<FastAnswer> | undefined {
  if (request.method !== 'tools/call') return undefined;
  const params = request.params;
  if (!params || typeof params.name !== 'string') return undefined;
  if (Object.keys(params).some((k) => !PLAIN_KEYS.has(k))) return undefined;
  const args = params.arguments;
  if (args !== undefined && !isPlainObject(args)) return undefined;
  const meta = params._meta;
  if (meta !== undefined && (!isPlainObject(meta) || 'progressToken' in meta)) return undefined;
  return federation.call(params.name, args ?? {}, who, signal).then(
    (result): FastAnswer => ({ result }),
    (err: unknown): FastAnswer => ({ error: jsonRpcError(err) }),
  );
}

// As the SDK's protocol layer answers an error thrown by a request handler.
function jsonRpcError(err: unknown): { code: number; message: string; data?: unknown } {
  if (err instanceof McpError)
    return { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) };
  return { code: -32603, message: err instanceof Error ? err.message : String(err) };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
