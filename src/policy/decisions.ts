/**
 * Shape checks for what OPA returns. They validate the JSON that crosses the wasm or HTTP boundary;
 * they do not decide anything — every rule lives in `policies/*.rego`.
 */
import { AmfError } from '../errors.js';
import type { AdmissionDecision, DelegationDecision, McpCallDecision, PolicyData } from './policyEngine.js';

/** Entry point of the admission decision (wasm entrypoint name and REST path under /v1/data). */
export const ADMISSION_ENTRYPOINT = 'amf/admission/decision';
/** Entry point of the delegation decision (wasm entrypoint name and REST path under /v1/data). */
export const DELEGATION_ENTRYPOINT = 'amf/delegation/decision';
/** Entry point of the MCP call decision (wasm entrypoint name and REST path under /v1/data). */
export const MCP_ENTRYPOINT = 'amf/mcp/decision';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

function malformed(what: string, value: unknown): AmfError {
  const shown = JSON.stringify(value) ?? String(value);
  return new AmfError('INTERNAL', `policy returned a malformed ${what}: ${shown.slice(0, 300)}`);
}

/** Checks an admission decision returned by OPA (`{allow, reasons, threshold}`). */
export function parseAdmissionDecision(value: unknown): AdmissionDecision {
  if (
    !isRecord(value) ||
    typeof value.allow !== 'boolean' ||
    !isStringArray(value.reasons) ||
    typeof value.threshold !== 'number'
  )
    throw malformed(
      'admission decision (expected {allow: boolean, reasons: string[], threshold: number})',
      value,
    );
  return { allow: value.allow, reasons: value.reasons, threshold: value.threshold };
}

/** Checks a delegation decision returned by OPA (`{allow, reasons, max_depth}`). */
export function parseDelegationDecision(value: unknown): DelegationDecision {
  if (
    !isRecord(value) ||
    typeof value.allow !== 'boolean' ||
    !isStringArray(value.reasons) ||
    typeof value.max_depth !== 'number'
  )
    throw malformed(
      'delegation decision (expected {allow: boolean, reasons: string[], max_depth: number})',
      value,
    );
  return { allow: value.allow, reasons: value.reasons, max_depth: value.max_depth };
}

/** Checks an MCP call decision returned by OPA (`{allow, reasons}`). */
export function parseMcpDecision(value: unknown): McpCallDecision {
  if (!isRecord(value) || typeof value.allow !== 'boolean' || !isStringArray(value.reasons))
    throw malformed('MCP call decision (expected {allow: boolean, reasons: string[]})', value);
  return { allow: value.allow, reasons: value.reasons };
}

/** Checks the policy data document (`data.policy`). */
export function parsePolicyData(value: unknown): PolicyData {
  if (
    !isRecord(value) ||
    !isRecord(value.thresholds) ||
    !Object.values(value.thresholds).every((t) => typeof t === 'number') ||
    typeof value.default_threshold !== 'number' ||
    typeof value.max_delegation_depth !== 'number' ||
    !isStringArray(value.protocol_allowlist)
  )
    throw malformed(
      'data.policy (expected {thresholds: {name: number}, default_threshold, max_delegation_depth, protocol_allowlist})',
      value,
    );
  return {
    thresholds: { ...(value.thresholds as Record<string, number>) },
    default_threshold: value.default_threshold,
    max_delegation_depth: value.max_delegation_depth,
    protocol_allowlist: [...value.protocol_allowlist],
  };
}
