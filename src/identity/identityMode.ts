/**
 * Which identity the process runs with (docs/decisions.md #18):
 * - AMF_IDENTITY_MODE=spiffe without a Workload API socket → hard failure at start; with a socket
 *   that gives no SVID in time → hard failure too (an explicit SPIFFE request is never downgraded);
 * - a socket (SPIFFE_ENDPOINT_SOCKET) without an explicit mode → SPIFFE is used; when the agent does
 *   not answer, static identity with a warning (`local` visibility only; mesh/public denied by OPA);
 * - AMF_IDENTITY_MODE=static, or neither → static identity, `local` visibility only.
 * Static identities are self-asserted: `svidVerified` is false, and the admission policy admits
 * mesh/public advertisements only with a verified SVID.
 */
import { existsSync } from 'node:fs';
import { AmfError } from '../errors.js';
import type { LogFn } from '../log.js';
import { StaticIdentity, type IdentityProvider } from './identityProvider.js';
import { workloadApiSocketPath } from './workloadApiSocket.js';

/** The decision before anything is opened. */
export type IdentityModeDecision =
  { mode: 'static'; warning?: string } | { mode: 'spiffe'; socket: string; required: boolean };

/** Applies the mode rules to the configured mode and the environment (no I/O but a stat). */
export function resolveIdentityMode(
  configured: 'static' | 'spiffe' | null,
  env: NodeJS.ProcessEnv = process.env,
): IdentityModeDecision {
  const socket = env.SPIFFE_ENDPOINT_SOCKET;
  let socketPath: string | undefined;
  try {
    socketPath = socket ? workloadApiSocketPath(socket) : undefined;
  } catch (err) {
    if (configured === 'spiffe') throw err;
    return { mode: 'static', warning: `${(err as Error).message}: static identities, local visibility only` };
  }
  const socketPresent = socketPath !== undefined && existsSync(socketPath);
  if (configured === 'spiffe') {
    if (!socketPresent)
      throw new AmfError(
        'UNAVAILABLE',
        `AMF_IDENTITY_MODE=spiffe but no SPIFFE Workload API socket is available (SPIFFE_ENDPOINT_SOCKET=${socket ?? 'unset'}); refusing to start`,
      );
    return { mode: 'spiffe', socket: socket!, required: true };
  }
  if (configured === 'static') return { mode: 'static' };
  if (socket) {
    if (socketPresent) return { mode: 'spiffe', socket, required: false };
    return {
      mode: 'static',
      warning: `SPIFFE_ENDPOINT_SOCKET=${socket} does not exist: static identities, local visibility only`,
    };
  }
  return { mode: 'static' };
}

/** Options of {@link openIdentity}. */
export interface OpenIdentityOptions {
  log?: LogFn;
  /** Which SPIFFE ID to be when the agent issues several (default `AMF_SPIFFE_ID`, else the first). */
  spiffeId?: string;
  /** How long to wait for the Workload API (default 10 s). */
  timeoutMs?: number;
}

/** Resolves the mode and opens the identity provider it names. */
export async function openIdentity(
  configured: 'static' | 'spiffe' | null,
  env: NodeJS.ProcessEnv = process.env,
  options: OpenIdentityOptions = {},
): Promise<IdentityProvider> {
  const decision = resolveIdentityMode(configured, env);
  if (decision.mode === 'static') return new StaticIdentity(decision.warning);
  const spiffeId = options.spiffeId ?? env.AMF_SPIFFE_ID;
  try {
    // Loaded only here: the Workload API client brings gRPC and protobuf.js (docs/performance.md).
    const { SpiffeIdentity } = await import('./spiffeIdentity.js');
    return await SpiffeIdentity.open({
      socket: decision.socket,
      ...(spiffeId ? { spiffeId } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.log ? { log: options.log } : {}),
    });
  } catch (err) {
    if (decision.required)
      throw new AmfError(
        'UNAVAILABLE',
        `AMF_IDENTITY_MODE=spiffe but the SPIFFE Workload API gave no identity: ${(err as Error).message}; refusing to start`,
      );
    return new StaticIdentity(
      `SPIFFE Workload API unavailable (${(err as Error).message}): static identities, local visibility only`,
    );
  }
}
