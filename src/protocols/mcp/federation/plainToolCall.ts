/**
 * The fast path of a plain federated `tools/call` on a live session of the coordinator's `/mcp`
 * (protocols/mcp/endpoint/sessionFastPath.ts, issue 14): the same federation call as the SDK
 * server's handler (policy, audit, namespacing, forward), without the server transport's
 * per-message work. What counts as plain, and how the answer keeps the SDK path's errors and
 * cancellation, is sessionFastPath.ts's, shared with a worker's `/mcp`.
 */
import type { McpFederation, McpCaller } from './federation.js';
import {
  answerCall,
  asPlainToolCall,
  type FastAnswer,
  type FastRequest,
  type FastSession,
} from '../endpoint/sessionFastPath.js';

/** The answer of `request` when it is a plain `tools/call`, else undefined (the SDK path). */
export function plainToolCall(
  federation: McpFederation,
  session: FastSession,
  request: FastRequest,
  who: McpCaller,
  signal: AbortSignal,
): Promise<FastAnswer> | undefined {
  const call = asPlainToolCall(request);
  if (!call) return undefined;
  return answerCall(session, request, signal, (callSignal) =>
    federation.call(call.name, call.arguments, who, callSignal),
  );
}
