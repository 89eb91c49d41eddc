/**
 * How the federation answers a `tools/call` it refused or could not complete: a tool result with
 * `isError` (and the policy's reasons in `_meta`), which a model can read, not a JSON-RPC error.
 * The agent's own JSON-RPC error (an unknown tool, bad arguments, a client capability the tool
 * needs and the caller did not declare) is a protocol answer, not a failure of the federation: it
 * reaches the caller unchanged, as from the agent directly. The guard itself is shared with every
 * other federated request (forward.ts).
 */
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ForwardAnswers } from './forward.js';

function denied(text: string, reasons: string[]): CallToolResult {
  return {
    content: [{ type: 'text', text }],
    isError: true,
    _meta: { 'amf/policy': { decision: 'deny', reasons } },
  };
}

/** The answers of a federated tool call. */
export const TOOL_CALL_ANSWERS: ForwardAnswers<CallToolResult> = {
  refused(reasons, unavailable) {
    if (unavailable) return denied('the AMF policy could not be evaluated: call refused', reasons);
    return denied(`the AMF policy denied this call: ${reasons.join(', ')}`, reasons);
  },
  failed(err, agentId, message) {
    if (isAgentError(err)) throw err;
    return {
      content: [{ type: 'text', text: `forwarding to ${agentId} failed: ${message}` }],
      isError: true,
    };
  },
  outcome: (result) => (result.isError ? 'tool_error' : 'ok'),
};

/**
 * True for a JSON-RPC error the agent answered with; false for what the SDK client raises itself
 * (its time limit, a closed connection), which the caller sees as a failed call.
 */
function isAgentError(err: unknown): err is McpError {
  return (
    err instanceof McpError &&
    err.code !== (ErrorCode.RequestTimeout as number) &&
    err.code !== (ErrorCode.ConnectionClosed as number)
  );
}
