/**
 * The guarded path of every federated request other than `tools/call` (resource reads and
 * subscriptions, prompt gets, completions): the same OPA decision (`data.amf.mcp.decision` with
 * `kind`), plaintext warning, TLS-pin refusal and audit record as a tool call. A refusal is a
 * JSON-RPC error here (these requests have no `isError` result shape): -32003 with the policy's
 * reasons, or the pin-mismatch code.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { PolicyEngine } from '../../policy/policyEngine.js';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../registry/policyNotices.js';
import type { McpAuditLog, McpAuditRecord } from './mcpAudit.js';
import { findPinMismatch, TLS_PIN_MISMATCH_REASON } from './tlsPins.js';

/** What a forwarded request reaches at the agent (the policy input's `kind`). */
export type ForwardKind = 'resource' | 'prompt' | 'completion';

/** JSON-RPC error code of a request the AMF policy refused. */
export const MCP_POLICY_DENIED_CODE = -32003;
/** JSON-RPC error code of a refusal because the agent's certificate no longer matches its pin. */
const MCP_TLS_PIN_MISMATCH_CODE = -32010;
/** MCP's "resource not found". */
export const MCP_RESOURCE_NOT_FOUND = -32002;

/** The federation's parts the guarded path uses. */
export interface ForwardDeps {
  policy: PolicyEngine;
  audit: McpAuditLog;
  notices: PolicyNotices;
  registry: AgentRegistry;
  auth: McpAuditRecord['auth'];
  endpoint: string;
  clientFor(agentId: string): Promise<Client>;
}

/** One request to forward. */
export interface ForwardRequest {
  kind: ForwardKind;
  /** The federated name or URI the caller used. */
  wireName: string;
  /** The agent and its own name or URI; undefined when nothing in the federation matches. */
  target: { agentId: string; name: string } | undefined;
  argumentBytes: number;
  who: { caller: string; sessionId: string | null };
}

function notFound(kind: ForwardKind, wireName: string): McpError {
  if (kind === 'resource')
    return new McpError(MCP_RESOURCE_NOT_FOUND, `Resource ${wireName} not found`, { uri: wireName });
  return new McpError(-32602, `${kind === 'prompt' ? 'Prompt' : 'Reference'} ${wireName} not found`);
}

/** Policy, auth tier, forward, audit; throws McpError on refusal, unknown names and failures. */
export async function guardedForward<T>(
  deps: ForwardDeps,
  req: ForwardRequest,
  run: (client: Client) => Promise<T>,
): Promise<T> {
  const started = Date.now();
  const base = {
    kind: 'mcp.call' as const,
    capability: req.kind,
    time: new Date(started).toISOString(),
    caller: req.who.caller,
    session_id: req.who.sessionId,
    wire_name: req.wireName.slice(0, 1024),
    argument_bytes: req.argumentBytes,
  };
  const record = (fields: Pick<McpAuditRecord, 'decision' | 'reasons' | 'outcome'> & { error?: string }) =>
    void deps.audit.append({
      ...base,
      tool: req.target ? `${req.target.agentId}/${req.target.name}`.slice(0, 1024) : null,
      agent_id: req.target?.agentId ?? null,
      duration_ms: Date.now() - started,
      auth: req.target ? deps.auth : 'none',
      ...fields,
    });
  const target = req.target;
  if (!target) {
    record({ decision: 'deny', reasons: [`unknown_${req.kind}`], outcome: 'denied' });
    throw notFound(req.kind, req.wireName);
  }
  let decision;
  try {
    decision = await deps.policy.mcp({
      caller: req.who.caller,
      agent_id: target.agentId,
      tool: target.name,
      kind: req.kind,
      trust_domain: deps.registry.get(target.agentId)?.record.trust_domain ?? '',
      argument_bytes: req.argumentBytes,
      agent_admitted: deps.registry.isLive(target.agentId),
    });
  } catch (err) {
    record({ decision: 'deny', reasons: ['policy_unavailable'], outcome: 'denied', error: String(err) });
    throw new McpError(MCP_POLICY_DENIED_CODE, 'the AMF policy could not be evaluated: request refused', {
      reasons: ['policy_unavailable'],
    });
  }
  if (!decision.allow) {
    record({ decision: 'deny', reasons: decision.reasons, outcome: 'denied' });
    throw new McpError(
      MCP_POLICY_DENIED_CODE,
      `the AMF policy denied this request: ${decision.reasons.join(', ')}`,
      {
        reasons: decision.reasons,
      },
    );
  }
  if (deps.auth === 'none')
    deps.notices.warn({
      reason: 'mcp_call_unauthenticated',
      message: `MCP ${req.kind} request ${target.agentId}/${target.name} forwarded over plaintext http:// without authentication`,
      agent_id: target.agentId,
      details: { [req.kind]: target.name, mcp_endpoint: deps.endpoint },
    });
  try {
    const result = await run(await deps.clientFor(target.agentId));
    record({ decision: 'allow', reasons: [], outcome: 'ok' });
    return result;
  } catch (err) {
    const mismatch = findPinMismatch(err);
    if (mismatch) {
      record({
        decision: 'deny',
        reasons: [TLS_PIN_MISMATCH_REASON],
        outcome: 'denied',
        error: mismatch.message,
      });
      throw new McpError(MCP_TLS_PIN_MISMATCH_CODE, mismatch.message, { reason: TLS_PIN_MISMATCH_REASON });
    }
    const message = err instanceof Error ? err.message : String(err);
    record({ decision: 'allow', reasons: [], outcome: 'failed', error: message.slice(0, 500) });
    // The agent's own JSON-RPC error (e.g. resource not found) reaches the caller unchanged.
    if (err instanceof McpError) throw err;
    throw new McpError(-32603, `forwarding to ${target.agentId} failed: ${message}`);
  }
}
