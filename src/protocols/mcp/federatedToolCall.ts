/**
 * How the federation answers a `tools/call` it refused or could not complete: a tool result with
 * `isError` (and the policy's reasons in `_meta`), which a model can read, not a JSON-RPC error.
 * The guard itself is shared with every other federated request (federatedForward.ts).
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ForwardAnswers } from './federatedForward.js';

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
  failed(_err, agentId, message) {
    return {
      content: [{ type: 'text', text: `forwarding to ${agentId} failed: ${message}` }],
      isError: true,
    };
  },
  outcome: (result) => (result.isError ? 'tool_error' : 'ok'),
};
