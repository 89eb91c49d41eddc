/**
 * Signatures vouched for by a JWT-SVID. A JWT-SVID cannot sign arbitrary data (only SPIRE holds its
 * key) and SPIRE issues no custom claims, so a signer makes a fresh Ed25519 key pair and asks the
 * Workload API for a JWT-SVID whose audience carries the key's JWK thumbprint (RFC 7638) next to
 * the verifier's audience: `[verifier, "amf-key:<thumbprint>"]`. The SVID then vouches for the key;
 * the key signs each payload (a compact JWS with the public key in its `jwk` header). The private
 * key never leaves the process, and each signer's key lives no longer than its SVID.
 */
import {
  calculateJwkThumbprint,
  CompactSign,
  compactVerify,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  importJWK,
  type CryptoKey,
  type JWK,
} from 'jose';
import type { IdentityProvider } from './identityProvider.js';

/** Audience prefix that carries the thumbprint of the key an SVID vouches for. */
export const KEY_AUDIENCE_PREFIX = 'amf-key:';
/** Largest signed payload (a WatcherSummary is well under 4 KiB). */
export const MAX_SIGNED_PAYLOAD_CHARS = 64 * 1024;

/** A payload signed by a vouched key. */
export interface SignedEnvelope {
  /** Compact JWS, EdDSA, header `{alg, jwk}`, payload the JSON document. */
  jws: string;
  /** JWT-SVID whose audience names the key's thumbprint. */
  svid: string;
}

/** Why a signed envelope was refused. */
export type EnvelopeRefusal =
  'unsigned' | 'svid_invalid' | 'signer_not_allowed' | 'key_not_vouched' | 'bad_signature';

export type EnvelopeCheck =
  { ok: true; payload: unknown; signer: string } | { ok: false; reason: EnvelopeRefusal; message: string };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Signs with a per-signer key that a JWT-SVID vouches for. */
export class VouchedSigner {
  private constructor(
    private readonly privateKey: CryptoKey,
    private readonly publicJwk: JWK,
    readonly svid: string,
    /** Unix ms after which a fresh signer should be made (half the SVID's lifetime). */
    readonly refreshAt: number,
  ) {}

  /** Makes a key pair and has `identity`'s JWT-SVID vouch for it to `audience`. */
  static async create(identity: IdentityProvider, audience: string): Promise<VouchedSigner> {
    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const publicJwk = await exportJWK(publicKey);
    const thumbprint = await calculateJwkThumbprint(publicJwk);
    const svid = await identity.jwtSvid([audience, `${KEY_AUDIENCE_PREFIX}${thumbprint}`]);
    const check = await identity.verifyJwtSvid(svid, audience);
    const now = Date.now();
    const refreshAt = check.ok ? now + (check.expiresAt * 1000 - now) / 2 : now;
    return new VouchedSigner(privateKey, publicJwk, svid, refreshAt);
  }

  /** Signs `payload` (JSON-serialised). */
  async sign(payload: unknown): Promise<SignedEnvelope> {
    const jws = await new CompactSign(encoder.encode(JSON.stringify(payload)))
      .setProtectedHeader({ alg: 'EdDSA', jwk: this.publicJwk })
      .sign(this.privateKey);
    return { jws, svid: this.svid };
  }
}

/** True when `value` looks like a SignedEnvelope (two bounded strings). */
export function isSignedEnvelope(value: unknown): value is SignedEnvelope {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.jws === 'string' &&
    typeof v.svid === 'string' &&
    v.jws.length <= MAX_SIGNED_PAYLOAD_CHARS * 2 &&
    v.svid.length <= 8192
  );
}

/** The payload of a JWS without checking anything (to find what a refused envelope was about). */
export function unverifiedPayload(jws: string): unknown {
  try {
    const part = jws.split('.')[1] ?? '';
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Verifies an envelope: the SVID against the trust bundle for `audience`, its subject allowed, its
 * audience vouching for the JWS key, and the JWS signature by that key.
 */
export async function verifyEnvelope(
  envelope: SignedEnvelope,
  identity: IdentityProvider,
  audience: string,
  signerAllowed: (spiffeId: string) => boolean,
): Promise<EnvelopeCheck> {
  const svid = await identity.verifyJwtSvid(envelope.svid, audience);
  if (!svid.ok) return { ok: false, reason: 'svid_invalid', message: `signer SVID refused: ${svid.message}` };
  if (!signerAllowed(svid.spiffeId))
    return { ok: false, reason: 'signer_not_allowed', message: `${svid.spiffeId} may not sign this output` };
  let header: ReturnType<typeof decodeProtectedHeader> | undefined;
  try {
    header = decodeProtectedHeader(envelope.jws);
  } catch {
    header = undefined;
  }
  if (header?.alg !== 'EdDSA' || typeof header.jwk !== 'object' || header.jwk === null)
    return {
      ok: false,
      reason: 'bad_signature',
      message: 'the signature header is not EdDSA with an embedded key',
    };
  const jwk = header.jwk as JWK;
  const thumbprint = await calculateJwkThumbprint(jwk).catch(() => '');
  if (!thumbprint || !svid.audience.includes(`${KEY_AUDIENCE_PREFIX}${thumbprint}`))
    return {
      ok: false,
      reason: 'key_not_vouched',
      message: 'the signing key is not the one the signer SVID vouches for',
    };
  try {
    const key = await importJWK(jwk, 'EdDSA');
    const { payload } = await compactVerify(envelope.jws, key, { algorithms: ['EdDSA'] });
    return { ok: true, payload: JSON.parse(decoder.decode(payload)), signer: svid.spiffeId };
  } catch {
    return { ok: false, reason: 'bad_signature', message: 'the signature does not match the signed content' };
  }
}
