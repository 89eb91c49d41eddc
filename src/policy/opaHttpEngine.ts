/**
 * Policy evaluation by an external OPA server (`--opa-url`), through its REST data API:
 * `POST {url}/v1/data/amf/admission/decision` with `{"input": ...}` answers `{"result": ...}`.
 * The server must have the AMF policy loaded, e.g. `opa run --server policies/`.
 */
import { AmfError } from '../errors.js';
import {
  ADMISSION_ENTRYPOINT,
  DELEGATION_ENTRYPOINT,
  MCP_ENTRYPOINT,
  parseAdmissionDecision,
  parseDelegationDecision,
  parseMcpDecision,
  parsePolicyData,
} from './decisions.js';
import type { AdmissionInput, DelegationInput, McpCallInput, PolicyEngine } from './policyEngine.js';

/** Per-request time limit for calls to the OPA server. */
export const OPA_HTTP_TIMEOUT_MS = 2_000;

const HOW_TO_LOAD =
  'start one with the AMF policy loaded: `opa run --server --addr 127.0.0.1:8181 policies/`';

/** Options of connectOpaServer. */
export interface OpaHttpOptions {
  /** Per-request timeout (default OPA_HTTP_TIMEOUT_MS). */
  timeoutMs?: number;
}

/**
 * Connects to an OPA server and checks, before returning, that it answers and has the AMF policy
 * and its data document loaded (else an UNAVAILABLE error explaining how to load them).
 */
export async function connectOpaServer(url: string, options: OpaHttpOptions = {}): Promise<PolicyEngine> {
  const timeoutMs = options.timeoutMs ?? OPA_HTTP_TIMEOUT_MS;
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    throw new AmfError(
      'INVALID_REQUEST',
      `--opa-url "${url}" is not a URL (expected e.g. http://127.0.0.1:8181)`,
    );
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:')
    throw new AmfError('INVALID_REQUEST', `--opa-url "${url}" must be http:// or https://`);
  const root = base.href.replace(/\/+$/, '');

  /** Reads `data.<path>`; `undefined` when the document is undefined on the server. */
  const query = async (path: string, input?: unknown): Promise<unknown> => {
    const target = `${root}/v1/data/${path}`;
    let res: Response;
    try {
      res = await fetch(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(input === undefined ? {} : { input }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      if (e.name === 'TimeoutError' || e.name === 'AbortError')
        throw new AmfError('TIMEOUT', `OPA server ${root} did not answer ${path} within ${timeoutMs} ms`);
      const why = e.cause?.code ?? e.cause?.message ?? e.message;
      throw new AmfError('UNAVAILABLE', `cannot reach OPA server ${root} (${why}); ${HOW_TO_LOAD}`);
    }
    const text = await res.text();
    if (!res.ok)
      throw new AmfError(
        'UNAVAILABLE',
        `OPA server ${root} answered HTTP ${res.status} for data.${path.replaceAll('/', '.')}: ${text.slice(0, 300)}`,
      );
    let body: { result?: unknown };
    try {
      body = JSON.parse(text) as { result?: unknown };
    } catch {
      throw new AmfError(
        'UNAVAILABLE',
        `OPA server ${root} answered non-JSON for ${path}: ${text.slice(0, 200)}`,
      );
    }
    return body.result;
  };

  const required = async (path: string, input: unknown): Promise<unknown> => {
    const result = await query(path, input);
    if (result === undefined)
      throw new AmfError(
        'UNAVAILABLE',
        `OPA server ${root} has no data.${path.replaceAll('/', '.')}: the AMF policy is not loaded; ${HOW_TO_LOAD}`,
      );
    return result;
  };

  // Startup check: reachable, data document present, both decisions defined.
  const data = await query('policy');
  if (data === undefined)
    throw new AmfError(
      'UNAVAILABLE',
      `OPA server ${root} has no data.policy (policies/data.json is not loaded); ${HOW_TO_LOAD}`,
    );
  parsePolicyData(data);
  parseAdmissionDecision(await required(ADMISSION_ENTRYPOINT, {}));
  parseDelegationDecision(
    await required(DELEGATION_ENTRYPOINT, { chain: [], delegator: 'amf-startup-probe' }),
  );
  parseMcpDecision(await required(MCP_ENTRYPOINT, {}));

  return {
    kind: 'opa-http',
    detail: root,
    admission: async (input: AdmissionInput) =>
      parseAdmissionDecision(await required(ADMISSION_ENTRYPOINT, input)),
    delegation: async (input: DelegationInput) =>
      parseDelegationDecision(await required(DELEGATION_ENTRYPOINT, input)),
    mcp: async (input: McpCallInput) => parseMcpDecision(await required(MCP_ENTRYPOINT, input)),
    data: async () => parsePolicyData(await query('policy')),
    close: () => Promise.resolve(),
  };
}
