/**
 * THE decision table of the AMF policy: every engine (wasm bundle, `opa eval`, OPA server, a
 * freshly rebuilt bundle) must give exactly these answers.
 */
import type {
  AdmissionDecision,
  AdmissionInput,
  DelegationDecision,
  DelegationInput,
  McpCallDecision,
  McpCallInput,
} from '../../src/policy/policyEngine.js';

/** One admission row: a name, the input, the expected decision. */
export interface AdmissionCase {
  name: string;
  input: AdmissionInput;
  expected: AdmissionDecision;
}

/** One delegation row. */
export interface DelegationCase {
  name: string;
  input: DelegationInput;
  expected: DelegationDecision;
}

type AdPatch = Partial<AdmissionInput['advertisement']>;
interface Patch {
  ad?: AdPatch;
  risk?: number;
  mismatch?: boolean;
  identity?: AdmissionInput['identity'];
  coordinatorTd?: string;
  requireTls?: boolean;
}

const SPIFFE = { mode: 'spiffe', svid_verified: true } as const;
const STATIC = { mode: 'static', svid_verified: false } as const;

/** A well-formed local advertisement from the coordinator's own trust domain, patched. */
export function admissionInput(patch: Patch = {}): AdmissionInput {
  return {
    advertisement: {
      agent_id: 'spiffe://amf.local/worker/summarizer',
      endpoint: 'http://127.0.0.1:8766',
      protocols: ['A2A/1.0', 'MCP/2025-06-18'],
      tags: ['text-summarize'],
      trust_domain: 'amf.local',
      visibility: 'local',
      card_url: 'http://127.0.0.1:8766/.well-known/agent-card.json',
      mcp_endpoint: 'http://127.0.0.1:8766/mcp',
      door: 'mdns',
      ...patch.ad,
    },
    summary: { risk_score: patch.risk ?? 0.1, risk_reason: 'rules: nothing unusual', scorer: 'rules' },
    summary_mismatch: patch.mismatch ?? false,
    identity: patch.identity ?? STATIC,
    coordinator_trust_domain: patch.coordinatorTd ?? 'amf.local',
    mcp_require_tls: patch.requireTls ?? false,
  };
}

const allow = (threshold: number): AdmissionDecision => ({ allow: true, reasons: [], threshold });
const deny = (threshold: number, ...reasons: string[]): AdmissionDecision => ({
  allow: false,
  reasons,
  threshold,
});

/** Admission rows (thresholds: local 0.7, mesh 0.3, public 0.1, default 0.5). */
export const ADMISSION_CASES: AdmissionCase[] = [
  { name: 'local agent, low risk: allowed', input: admissionInput(), expected: allow(0.7) },
  {
    name: 'local, risk 0 via the NATS door: allowed',
    input: admissionInput({ risk: 0, ad: { door: 'nats' } }),
    expected: allow(0.7),
  },
  {
    name: 'local, risk exactly at threshold 0.7: allowed',
    input: admissionInput({ risk: 0.7 }),
    expected: allow(0.7),
  },
  {
    name: 'local, risk just above (0.7000001): denied',
    input: admissionInput({ risk: 0.7000001 }),
    expected: deny(0.7, 'risk_above_threshold'),
  },
  {
    name: 'local, risk 1.0: denied',
    input: admissionInput({ risk: 1 }),
    expected: deny(0.7, 'risk_above_threshold'),
  },
  {
    name: 'mesh without SVID (static identity): denied',
    input: admissionInput({ ad: { visibility: 'mesh' } }),
    expected: deny(0.3, 'visibility_requires_svid'),
  },
  {
    name: 'mesh, spiffe mode but SVID not verified: denied',
    input: admissionInput({ ad: { visibility: 'mesh' }, identity: { mode: 'spiffe', svid_verified: false } }),
    expected: deny(0.3, 'visibility_requires_svid'),
  },
  {
    name: 'mesh, static identity claiming svid_verified: denied (static is local only)',
    input: admissionInput({ ad: { visibility: 'mesh' }, identity: { mode: 'static', svid_verified: true } }),
    expected: deny(0.3, 'visibility_requires_svid'),
  },
  {
    name: 'mesh with SVID, low risk: allowed',
    input: admissionInput({ ad: { visibility: 'mesh' }, identity: SPIFFE, risk: 0.2 }),
    expected: allow(0.3),
  },
  {
    name: 'mesh with SVID, risk exactly 0.3: allowed',
    input: admissionInput({ ad: { visibility: 'mesh' }, identity: SPIFFE, risk: 0.3 }),
    expected: allow(0.3),
  },
  {
    name: 'mesh with SVID, risk 0.31: denied',
    input: admissionInput({ ad: { visibility: 'mesh' }, identity: SPIFFE, risk: 0.31 }),
    expected: deny(0.3, 'risk_above_threshold'),
  },
  {
    name: 'public with SVID, risk exactly 0.1: allowed',
    input: admissionInput({ ad: { visibility: 'public' }, identity: SPIFFE, risk: 0.1 }),
    expected: allow(0.1),
  },
  {
    name: 'public with SVID, risk 0.15 (allowed locally): denied',
    input: admissionInput({ ad: { visibility: 'public' }, identity: SPIFFE, risk: 0.15 }),
    expected: deny(0.1, 'risk_above_threshold'),
  },
  {
    name: 'public, static identity, risk 0: denied',
    input: admissionInput({ ad: { visibility: 'public' }, risk: 0 }),
    expected: deny(0.1, 'visibility_requires_svid'),
  },
  {
    name: 'foreign trust domain with SVID at mesh visibility: allowed',
    input: admissionInput({
      ad: { visibility: 'mesh', trust_domain: 'partner.example' },
      identity: SPIFFE,
      risk: 0.1,
    }),
    expected: allow(0.3),
  },
  {
    name: 'summary mismatch with risk 0: always denied',
    input: admissionInput({ mismatch: true, risk: 0 }),
    expected: deny(0.7, 'summary_mismatch'),
  },
  {
    name: 'summary mismatch even for a verified mesh agent: denied',
    input: admissionInput({ mismatch: true, risk: 0, ad: { visibility: 'mesh' }, identity: SPIFFE }),
    expected: deny(0.3, 'summary_mismatch'),
  },
  {
    name: 'no allowed protocol: denied',
    input: admissionInput({ ad: { protocols: ['FOO/1.0', 'A2A/9.9'] } }),
    expected: deny(0.7, 'protocol_not_allowed'),
  },
  {
    name: 'no protocol at all: denied',
    input: admissionInput({ ad: { protocols: [] } }),
    expected: deny(0.7, 'protocol_not_allowed'),
  },
  {
    name: 'one allowed protocol among unknown ones (AMP/1.0): allowed',
    input: admissionInput({ ad: { protocols: ['FOO/1.0', 'AMP/1.0'] } }),
    expected: allow(0.7),
  },
  {
    name: 'A2A/0.3 only: allowed',
    input: admissionInput({ ad: { protocols: ['A2A/0.3'], mcp_endpoint: null } }),
    expected: allow(0.7),
  },
  {
    name: 'MCP/2025-11-25 only: allowed',
    input: admissionInput({ ad: { protocols: ['MCP/2025-11-25'] } }),
    expected: allow(0.7),
  },
  {
    name: 'plaintext MCP without require_tls: allowed',
    input: admissionInput({ requireTls: false }),
    expected: allow(0.7),
  },
  {
    name: 'plaintext MCP with require_tls: denied',
    input: admissionInput({ requireTls: true }),
    expected: deny(0.7, 'plaintext_mcp_refused'),
  },
  {
    name: 'plaintext MCP with an upper-case scheme and require_tls: denied',
    input: admissionInput({ requireTls: true, ad: { mcp_endpoint: 'HTTP://127.0.0.1:8766/mcp' } }),
    expected: deny(0.7, 'plaintext_mcp_refused'),
  },
  {
    name: 'https MCP with require_tls: allowed',
    input: admissionInput({ requireTls: true, ad: { mcp_endpoint: 'https://127.0.0.1:8766/mcp' } }),
    expected: allow(0.7),
  },
  {
    name: 'no MCP endpoint with require_tls: allowed',
    input: admissionInput({ requireTls: true, ad: { protocols: ['A2A/1.0'], mcp_endpoint: null } }),
    expected: allow(0.7),
  },
  {
    name: 'foreign trust domain at local visibility: denied',
    input: admissionInput({ ad: { trust_domain: 'evil.example' } }),
    expected: deny(0.7, 'foreign_trust_domain'),
  },
  {
    name: 'several reasons at once (local, sorted)',
    input: admissionInput({
      ad: { trust_domain: 'evil.example', protocols: ['X/1'] },
      risk: 0.9,
      mismatch: true,
      requireTls: true,
    }),
    expected: deny(
      0.7,
      'foreign_trust_domain',
      'plaintext_mcp_refused',
      'protocol_not_allowed',
      'risk_above_threshold',
      'summary_mismatch',
    ),
  },
  {
    name: 'several reasons at once (public, static)',
    input: admissionInput({ ad: { visibility: 'public', protocols: [] }, risk: 0.5, requireTls: true }),
    expected: deny(
      0.1,
      'plaintext_mcp_refused',
      'protocol_not_allowed',
      'risk_above_threshold',
      'visibility_requires_svid',
    ),
  },
  {
    name: 'unknown visibility with a verified SVID: default threshold 0.5 applies',
    input: admissionInput({ ad: { visibility: 'galaxy' as 'local' }, identity: SPIFFE, risk: 0.5 }),
    expected: allow(0.5),
  },
  {
    name: 'unknown visibility without SVID: denied (only local is self-asserted)',
    input: admissionInput({ ad: { visibility: 'galaxy' as 'local' }, risk: 0.6 }),
    expected: deny(0.5, 'risk_above_threshold', 'visibility_requires_svid'),
  },
  {
    name: 'malformed input (no summary, no mismatch flag): denied (fail closed)',
    input: {
      ...admissionInput(),
      summary: undefined,
      summary_mismatch: undefined,
    } as unknown as AdmissionInput,
    expected: deny(0.7, 'risk_above_threshold', 'summary_mismatch'),
  },
];

const ok = (): DelegationDecision => ({ allow: true, reasons: [], max_depth: 5 });
const refuse = (...reasons: string[]): DelegationDecision => ({ allow: false, reasons, max_depth: 5 });

/** Delegation rows (max depth 5). */
export const DELEGATION_CASES: DelegationCase[] = [
  { name: 'empty chain: allowed', input: { chain: [], delegator: 'a' }, expected: ok() },
  { name: 'depth 4: allowed', input: { chain: ['a', 'b', 'c', 'd'], delegator: 'e' }, expected: ok() },
  {
    name: 'depth 5: denied',
    input: { chain: ['a', 'b', 'c', 'd', 'e'], delegator: 'f' },
    expected: refuse('delegation_depth_exceeded'),
  },
  {
    name: 'depth 7: denied',
    input: { chain: ['a', 'b', 'c', 'd', 'e', 'f', 'g'], delegator: 'h' },
    expected: refuse('delegation_depth_exceeded'),
  },
  {
    name: 'delegator is the root of the chain: cycle',
    input: { chain: ['a', 'b'], delegator: 'a' },
    expected: refuse('delegation_cycle'),
  },
  {
    name: 'delegator delegated just before: cycle',
    input: { chain: ['a', 'b'], delegator: 'b' },
    expected: refuse('delegation_cycle'),
  },
  {
    name: 'chain already repeats an agent: cycle',
    input: { chain: ['a', 'b', 'a'], delegator: 'c' },
    expected: refuse('delegation_cycle'),
  },
  {
    name: 'cycle and depth at once',
    input: { chain: ['a', 'b', 'c', 'd', 'e'], delegator: 'c' },
    expected: refuse('delegation_cycle', 'delegation_depth_exceeded'),
  },
  {
    name: 'malformed chain: denied (fail closed)',
    input: { chain: 'a,b', delegator: 'c' } as unknown as DelegationInput,
    expected: refuse('invalid_input'),
  },
];

/** One MCP call row (`data.amf.mcp.decision`). */
export interface McpCase {
  name: string;
  input: McpCallInput;
  expected: McpCallDecision;
}

/** A well-formed call of the echo worker's tool; rows patch it. */
export function mcpInput(patch: Partial<McpCallInput> = {}): McpCallInput {
  return {
    caller: '127.0.0.1',
    agent_id: 'spiffe://local/worker/echo',
    tool: 'echo',
    trust_domain: 'local',
    argument_bytes: 16,
    agent_admitted: true,
    ...patch,
  };
}

const mcpAllow = (): McpCallDecision => ({ allow: true, reasons: [] });
const mcpDeny = (...reasons: string[]): McpCallDecision => ({ allow: false, reasons });

export const MCP_CASES: McpCase[] = [
  { name: 'mcp: small call of an admitted agent', input: mcpInput(), expected: mcpAllow() },
  {
    name: 'mcp: arguments exactly at the 1 MiB limit',
    input: mcpInput({ argument_bytes: 1048576 }),
    expected: mcpAllow(),
  },
  {
    name: 'mcp: arguments one byte above the limit',
    input: mcpInput({ argument_bytes: 1048577 }),
    expected: mcpDeny('arguments_too_large'),
  },
  {
    name: 'mcp: agent not admitted',
    input: mcpInput({ agent_admitted: false }),
    expected: mcpDeny('agent_not_admitted'),
  },
  {
    name: 'mcp: tool on the data deny list (*/tool)',
    input: mcpInput({ tool: 'amf_denied_tool' }),
    expected: mcpDeny('tool_denied'),
  },
  {
    name: 'mcp: several reasons, sorted',
    input: mcpInput({ tool: 'amf_denied_tool', agent_admitted: false, argument_bytes: 5e6 }),
    expected: mcpDeny('agent_not_admitted', 'arguments_too_large', 'tool_denied'),
  },
  {
    name: 'mcp: malformed input fails closed',
    input: { caller: 'x' } as unknown as McpCallInput,
    expected: mcpDeny('agent_not_admitted', 'arguments_too_large', 'input_invalid'),
  },
];
