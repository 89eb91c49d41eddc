/**
 * The policy decision point. Rego files under `policies/` are the single source of truth; they are
 * evaluated by real OPA — in-process from the wasm bundle that `opa build -t wasm` compiles from them,
 * or by an external OPA server (`--opa-url`). No rule is written a second time in TypeScript.
 */

/** What the admission policy is asked about one advertisement. */
export interface AdmissionInput {
  advertisement: {
    agent_id: string;
    endpoint: string;
    protocols: string[];
    tags: string[];
    trust_domain: string;
    visibility: 'local' | 'mesh' | 'public';
    card_url: string | null;
    mcp_endpoint: string | null;
    door: 'mdns' | 'nats';
  };
  summary: { risk_score: number; risk_reason: string; scorer: 'rules' | 'llm' };
  /** Cross-verification found a field where the watcher disagrees with the raw record. */
  summary_mismatch: boolean;
  identity: { mode: 'static' | 'spiffe'; svid_verified: boolean };
  /** The coordinator's own trust domain. */
  coordinator_trust_domain: string;
  mcp_require_tls: boolean;
}

/** The admission policy's answer (`data.amf.admission.decision`). */
export interface AdmissionDecision {
  allow: boolean;
  /** Machine-readable reasons for a deny (empty when allowed), e.g. `risk_above_threshold`. */
  reasons: string[];
  /** The risk threshold that applied. */
  threshold: number;
}

/** What the delegation policy is asked about one `amf.task.delegate` (docs/decisions.md #7). */
export interface DelegationInput {
  /** The parent task's delegation chain, root-first (agent ids that delegated before). */
  chain: string[];
  /** The agent asking to delegate. */
  delegator: string;
}

/** The delegation policy's answer (`data.amf.delegation.decision`). */
export interface DelegationDecision {
  allow: boolean;
  /** Machine-readable reasons for a deny, sorted: `delegation_cycle`, `delegation_depth_exceeded`, ... */
  reasons: string[];
  /** The depth limit that applied (`data.policy.max_delegation_depth`). */
  max_depth: number;
}

/** What the MCP call policy is asked about one `tools/call` on the federated endpoint. */
export interface McpCallInput {
  /** Who called: the remote address of the MCP client (API-key callers are not told apart yet). */
  caller: string;
  /** The agent whose tool is called. */
  agent_id: string;
  /** The tool's own name at the agent (not the federated wire name); for other kinds the prompt name or resource URI. */
  tool: string;
  /** What is reached: `tool` (absent means tool), `resource`, `prompt` or `completion`. */
  kind?: 'tool' | 'resource' | 'prompt' | 'completion';
  /** The agent's trust domain. */
  trust_domain: string;
  /** Size of the JSON-encoded arguments. */
  argument_bytes: number;
  /** The agent is admitted and live in this coordinator's registry right now. */
  agent_admitted: boolean;
}

/** The MCP call policy's answer (`data.amf.mcp.decision`). */
export interface McpCallDecision {
  allow: boolean;
  /** Sorted deny reasons: `agent_not_admitted`, `arguments_too_large`, `tool_denied`, ... */
  reasons: string[];
}

/** A policy decision point backed by real OPA (wasm in-process or an OPA server). */
export interface PolicyEngine {
  /** `opa-wasm` (in-process bundle) or `opa-http` (external server). */
  readonly kind: 'opa-wasm' | 'opa-http';
  /** Where the policy came from (bundle path or server URL) for /health. */
  readonly detail: string;
  /** Evaluates `data.amf.admission.decision`. */
  admission(input: AdmissionInput): Promise<AdmissionDecision>;
  /** Evaluates `data.amf.delegation.decision`. */
  delegation(input: DelegationInput): Promise<DelegationDecision>;
  /** Evaluates `data.amf.mcp.decision` (one federated MCP tool call). */
  mcp(input: McpCallInput): Promise<McpCallDecision>;
  /** The policy data document (`data.policy`): thresholds and limits. */
  data(): Promise<PolicyData>;
  /** Releases what the engine holds (nothing to release for the HTTP engine). */
  close(): Promise<void>;
}

/** `data.policy` from `policies/data.json`. */
export interface PolicyData {
  /** Risk thresholds keyed by advertisement visibility (`local`, `mesh`, `public`). */
  thresholds: Record<string, number>;
  /** Threshold for a visibility level with no entry in `thresholds`. */
  default_threshold: number;
  max_delegation_depth: number;
  /** An advertisement must list at least one of these protocols. */
  protocol_allowlist: string[];
}
