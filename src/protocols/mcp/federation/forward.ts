/**
 * The guarded path of every federated request, `tools/call` and the rest (resource reads and
 * subscriptions, prompt gets, completions): the OPA decision (`data.amf.mcp.decision`, with `kind`
 * for non-tool requests), plaintext warning, TLS-pin refusal and audit record. How a refusal or a
 * failure is answered differs by request: a tool call answers with an `isError` result
 * (toolCall.ts); the rest have no such shape, so they get a JSON-RPC error (-32003 with
 * the policy's reasons, or the pin-mismatch code).
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { PolicyEngine } from '../../../policy/policyEngine.js';
import type { AgentRegistry } from '../../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../../registry/policyNotices.js';
import type { McpAuditLog, McpAuditRecord } from './audit.js';
import type { LogFn } from '../../../log.js';
import { findPinMismatch, TLS_PIN_MISMATCH_REASON } from './tlsPins.js';

/** What a forwarded request reaches at the agent (the policy input's `kind`). */
export type ForwardKind = 'tool' | 'resource' | 'prompt' | 'completion';

/** JSON-RPC error code of a request the AMF policy refused. */
export const MCP_POLICY_DENIED_CODE = -32003;
/** JSON-RPC error code of a call refused because the agent's certificate no longer matches its pin. */
export const MCP_TLS_PIN_MISMATCH_CODE = -32010;
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
  log?: LogFn | undefined;
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

/** How refusals and failures are answered: returned as a result, or thrown. */
export interface ForwardAnswers<T> {
  /** A policy refusal; `unavailable` when no decision could be had (fail closed). */
  refused(reasons: string[], unavailable: boolean): T;
  /** The agent could not be reached or failed (not a pin mismatch). */
  failed(err: unknown, agentId: string, message: string): T;
  /** The audit outcome of an answer the agent gave. */
  outcome(result: T): 'ok' | 'tool_error';
}

/** Answers as JSON-RPC errors: the requests other than `tools/call`. */
function jsonRpcAnswers<T>(): ForwardAnswers<T> {
  return {
    refused(reasons, unavailable) {
      if (unavailable)
        throw new McpError(MCP_POLICY_DENIED_CODE, 'the AMF policy could not be evaluated: request refused', {
          reasons,
        });
      throw new McpError(
        MCP_POLICY_DENIED_CODE,
        `the AMF policy denied this request: ${reasons.join(', ')}`,
        {
          reasons,
        },
      );
    },
    failed(err, agentId, message) {
      // The agent's own JSON-RPC error (e.g. resource not found) reaches the caller unchanged.
      if (err instanceof McpError) throw err;
      throw new McpError(-32603, `forwarding to ${agentId} failed: ${message}`);
    },
    outcome: () => 'ok',
  };
}

function notFound(kind: ForwardKind, wireName: string): McpError {
  if (kind === 'resource')
    return new McpError(MCP_RESOURCE_NOT_FOUND, `Resource ${wireName} not found`, { uri: wireName });
  const what = kind === 'tool' ? 'Tool' : kind === 'prompt' ? 'Prompt' : 'Reference';
  return new McpError(ErrorCode.InvalidParams, `${what} ${wireName} not found`);
}

/**
 * Policy, auth tier, forward, audit. Unknown names and pin mismatches throw McpError; refusals and
 * failures are answered by `answers` (default: thrown as JSON-RPC errors).
 */
export async function guardedForward<T>(
  deps: ForwardDeps,
  req: ForwardRequest,
  run: (client: Client) => Promise<T>,
  answers: ForwardAnswers<T> = jsonRpcAnswers<T>(),
): Promise<T> {
  const started = Date.now();
  const { kind } = req;
  const isTool = kind === 'tool';
  const base = {
    kind: 'mcp.call' as const,
    // Tool calls carry no `capability` in the audit, nor a `kind` in the policy input.
    ...(kind === 'tool' ? {} : { capability: kind }),
    time: new Date(started).toISOString(),
    caller: req.who.caller,
    session_id: req.who.sessionId,
    wire_name: req.wireName.slice(0, 1024),
    argument_bytes: req.argumentBytes,
  };
  // Not awaited: the audit log tracks the store acknowledgement (see McpAuditLog.append).
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
      ...(isTool ? {} : { kind: req.kind }),
      trust_domain: deps.registry.get(target.agentId)?.record.trust_domain ?? '',
      argument_bytes: req.argumentBytes,
      agent_admitted: deps.registry.isLive(target.agentId),
    });
  } catch (err) {
    // No decision, no call (fail closed).
    record({ decision: 'deny', reasons: ['policy_unavailable'], outcome: 'denied', error: String(err) });
    return answers.refused(['policy_unavailable'], true);
  }
  if (!decision.allow) {
    record({ decision: 'deny', reasons: decision.reasons, outcome: 'denied' });
    return answers.refused(decision.reasons, false);
  }
  // Plaintext tier: warned on every call, not just once (README "MCP call authentication").
  const warning =
    deps.auth === 'none' || deps.auth === 'bearer'
      ? plaintextWarning(deps, () => ({
          reason: 'mcp_call_unauthenticated',
          message: `MCP ${isTool ? 'call' : `${req.kind} request`} ${target.agentId}/${target.name} forwarded over plaintext http:// ${deps.auth === 'bearer' ? "(the coordinator's bearer authenticates it to the agent; the agent is not authenticated)" : 'without authentication'}`,
          agent_id: target.agentId,
          details: { [req.kind]: target.name, mcp_endpoint: deps.endpoint },
        }))
      : undefined;
  try {
    const result = await run(await deps.clientFor(target.agentId));
    record({ decision: 'allow', reasons: [], outcome: answers.outcome(result) });
    return result;
  } catch (err) {
    const mismatch = findPinMismatch(err);
    if (mismatch) {
      // Refused, not failed: the peer is not the agent that was admitted. Warned by the agent fetch.
      record({
        decision: 'deny',
        reasons: [TLS_PIN_MISMATCH_REASON],
        outcome: 'denied',
        error: mismatch.message,
      });
      throw new McpError(MCP_TLS_PIN_MISMATCH_CODE, mismatch.message, {
        reason: TLS_PIN_MISMATCH_REASON,
        agent_id: mismatch.agentId,
        pinned_sha256: mismatch.expected,
        presented_sha256: mismatch.actual,
      });
    }
    const message = err instanceof Error ? err.message : String(err);
    record({ decision: 'allow', reasons: [], outcome: 'failed', error: message.slice(0, 500) });
    return answers.failed(err, target.agentId, message);
  } finally {
    warning?.callEnded();
  }
}

/** A call still running after this long has its plaintext warning published without waiting for its end. */
const WARNING_LATEST_MS = 1000;

/**
 * The plaintext warning of one forwarded call. Built, signed and published when the call ends, in
 * the turn that also publishes its audit record, once the answer is written: the two leave in one
 * socket write (fabric/coalescedWrites.ts), and none of it competes with the worker and nats-server
 * for the CPU while the caller waits. Before, it went out while the forward was in flight: on two
 * cores, that work and nats-server's storing it delayed the agent's answer (issue 31). A long call
 * is warned about after WARNING_LATEST_MS instead.
 */
function plaintextWarning(
  deps: ForwardDeps,
  build: () => Parameters<PolicyNotices['warn']>[0],
): { callEnded(): void } {
  let sent = false;
  const send = () => {
    if (sent) return;
    sent = true;
    clearTimeout(latest);
    try {
      deps.notices.warn(build());
    } catch (err) {
      deps.log?.('warn', 'mcp_call_unauthenticated warning not published', { err: String(err) });
    }
  };
  const latest = setTimeout(send, WARNING_LATEST_MS);
  latest.unref();
  return { callEnded: () => void setImmediate(send) };
}
