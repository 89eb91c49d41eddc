/**
 * The policy module's entry: picks the engine from the configuration. `--opa-url` → an external OPA
 * server; `--policy PATH` → that bundle or Rego directory; neither → the committed wasm bundle.
 */
import { AmfError } from '../errors.js';
import { connectOpaServer } from './opaHttpEngine.js';
import { loadPolicyPath, loadWasmPolicy } from './opaWasmEngine.js';
import type { PolicyEngine } from './policyEngine.js';

export type {
  AdmissionDecision,
  AdmissionInput,
  DelegationDecision,
  DelegationInput,
  McpCallDecision,
  McpCallInput,
  PolicyData,
  PolicyEngine,
} from './policyEngine.js';
export { ADMISSION_ENTRYPOINT, DELEGATION_ENTRYPOINT, MCP_ENTRYPOINT } from './decisions.js';
export { connectOpaServer, OPA_HTTP_TIMEOUT_MS } from './opaHttpEngine.js';
export {
  DEFAULT_BUNDLE_PATH,
  loadPolicyPath,
  loadWasmPolicy,
  type WasmPolicyEngine,
} from './opaWasmEngine.js';
export { findOpaBinary, OPA_VERSION } from './opaBuild.js';

/** How to obtain the policy engine (CLI `--opa-url` / `--policy`). */
export interface PolicyEngineOptions {
  /** External OPA server base URL (`--opa-url`). */
  opaUrl?: string | null;
  /** A wasm bundle `.tar.gz` or a directory of `.rego` files (`--policy`). */
  policyPath?: string | null;
}

/** Creates the policy engine: OPA server, `--policy` path, or the committed wasm bundle. */
export async function createPolicyEngine(options: PolicyEngineOptions = {}): Promise<PolicyEngine> {
  if (options.opaUrl && options.policyPath)
    throw new AmfError(
      'INVALID_REQUEST',
      '--opa-url and --policy are exclusive: the OPA server evaluates its own loaded policy',
    );
  if (options.opaUrl) return connectOpaServer(options.opaUrl);
  if (options.policyPath) return loadPolicyPath(options.policyPath);
  return loadWasmPolicy();
}
