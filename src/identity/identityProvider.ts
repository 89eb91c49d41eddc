/**
 * What a process knows about its own identity (notes/amf.md section 10): its agent id, trust
 * domain, SVIDs and the trust bundles to check others with. Two implementations: StaticIdentity
 * (self-asserted, `local` visibility only, nothing to verify with) and SpiffeIdentity (SVIDs from the
 * SPIFFE Workload API, see spiffeIdentity.ts).
 */
import type { X509Certificate } from 'node:crypto';
import { AmfError } from '../errors.js';
import type { JwtSvidCheck } from './jwtSvidVerifier.js';
import type { X509Svid } from './x509Material.js';

/** An identity provider. */
export interface IdentityProvider {
  readonly mode: 'static' | 'spiffe';
  /** True only for identities proven by a SPIFFE SVID. */
  readonly svidVerified: boolean;
  /** This workload's id (its SPIFFE ID under SPIFFE; undefined for a static coordinator). */
  readonly agentId: string | undefined;
  readonly trustDomain: string | undefined;
  /** Shown to the operator when the mode is a fallback. */
  readonly warning?: string | undefined;
  /** The newest X.509-SVID (SPIFFE only). */
  x509Svid(): X509Svid | undefined;
  /** X.509 CA certificates by trust domain (SPIFFE only). */
  x509Bundles(): ReadonlyMap<string, readonly X509Certificate[]>;
  /** A JWT-SVID for these audiences; fails under static identity. */
  jwtSvid(audience: readonly string[]): Promise<string>;
  /** Verifies a JWT-SVID presented to us; always refused under static identity. */
  verifyJwtSvid(token: string, audience: string, now?: Date): Promise<JwtSvidCheck>;
  close(): Promise<void>;
}

/** Self-asserted identity: nothing to present, nothing to verify with. */
export class StaticIdentity implements IdentityProvider {
  readonly mode = 'static' as const;
  readonly svidVerified = false;
  readonly agentId = undefined;
  readonly trustDomain = undefined;

  constructor(readonly warning?: string) {}

  x509Svid(): undefined {
    return undefined;
  }
  x509Bundles(): ReadonlyMap<string, readonly X509Certificate[]> {
    return new Map();
  }
  jwtSvid(): Promise<string> {
    return Promise.reject(
      new AmfError('UNAVAILABLE', 'static identity has no JWT-SVID (SPIFFE is not active)'),
    );
  }
  verifyJwtSvid(): Promise<JwtSvidCheck> {
    return Promise.resolve({
      ok: false,
      reason: 'unknown_trust_domain',
      message: 'SPIFFE is not active here: no trust bundle to verify a JWT-SVID with',
    });
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}
