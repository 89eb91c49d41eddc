/**
 * Which identity mode the mesh runs in (decision #18, notes/amf.md section 10):
 * - AMF_IDENTITY_MODE=spiffe without a Workload API socket → hard failure at start;
 * - a socket without an explicit mode → SPIFFE would be tried; this release has no SPIFFE client, so
 *   it falls back to static identities restricted to `local` visibility, and says so;
 * - neither → static identities, `local` visibility only.
 * Static identities are self-asserted, so `svidVerified` is false and mesh/public advertisements are
 * denied by policy.
 */
import { existsSync } from 'node:fs';
import { AmfError } from '../errors.js';

export interface IdentityMode {
  mode: 'static' | 'spiffe';
  svidVerified: boolean;
  /** Shown to the operator when the mode is a fallback. */
  warning?: string;
}

/** Resolves the identity mode from the configured mode and the environment. */
export function resolveIdentityMode(
  configured: 'static' | 'spiffe' | null,
  env: NodeJS.ProcessEnv = process.env,
): IdentityMode {
  const socket = env.SPIFFE_ENDPOINT_SOCKET;
  const socketPath = socket?.replace(/^unix:\/\//, '');
  const socketPresent = socketPath !== undefined && socketPath !== '' && existsSync(socketPath);
  if (configured === 'spiffe') {
    if (!socketPresent)
      throw new AmfError(
        'UNAVAILABLE',
        `AMF_IDENTITY_MODE=spiffe but no SPIFFE Workload API socket is available (SPIFFE_ENDPOINT_SOCKET=${socket ?? 'unset'}); refusing to start`,
      );
    throw new AmfError(
      'UNAVAILABLE',
      'AMF_IDENTITY_MODE=spiffe: SPIFFE identities are not supported by this release yet',
    );
  }
  if (configured === null && socket) {
    return {
      mode: 'static',
      svidVerified: false,
      warning: `SPIFFE_ENDPOINT_SOCKET is set but SPIFFE is not supported yet: static identities, local visibility only`,
    };
  }
  return { mode: 'static', svidVerified: false };
}
