/**
 * Compact JWTs (EdDSA) signed with an nkey pair: the coordinator's bearers at worker edges and its
 * invites. Signed here by hand (an nkey signs raw bytes; it has no private KeyObject for jose) and
 * verified by jose against the signer's public key, so the format is the standard one any JWT
 * library reads.
 */
import { randomUUID } from 'node:crypto';
import { jwtVerify, errors as joseErrors, type JWTPayload } from 'jose';
import type { AgentKey } from './agentKey.js';
import { publicKeyObject } from './nkeyPublic.js';

const HEADER = Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: 'JWT' })).toString('base64url');

export interface TokenClaims {
  /** Who the token is for (`aud`): an agent id, or `amf:join` for invites. */
  audience: string;
  /** Lifetime from now. */
  ttlSeconds: number;
  /** Who it speaks for (`sub`). */
  subject?: string;
  /** Further private claims (names that do not clash with the registered ones). */
  extra?: Record<string, unknown>;
}

/** Signs a token with `key`: `iss` is the key's public half, `jti` a fresh UUID. */
export function issueToken(key: AgentKey, claims: TokenClaims, now = Date.now()): string {
  const iat = Math.floor(now / 1000);
  const payload: JWTPayload = {
    ...(claims.extra ?? {}),
    iss: key.publicKey,
    aud: claims.audience,
    iat,
    exp: iat + Math.max(1, Math.round(claims.ttlSeconds)),
    jti: randomUUID(),
    ...(claims.subject !== undefined ? { sub: claims.subject } : {}),
  };
  const body = `${HEADER}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  return `${body}.${key.sign(new TextEncoder().encode(body))}`;
}

/** Why a token was refused, as a stable code and a sentence a person can act on. */
export class TokenRefused extends Error {
  constructor(
    readonly reason: 'malformed' | 'bad_signature' | 'expired' | 'wrong_audience' | 'wrong_issuer',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Verifies `token` against `issuerKey` (an nkey user public key) for `audience`; returns its claims
 * or throws {@link TokenRefused}. Clock skew of 30 s is allowed.
 */
export async function verifyToken(
  token: string,
  issuerKey: string,
  audience: string,
  now = Date.now(),
): Promise<JWTPayload> {
  if (token.length > 8192 || token.split('.').length !== 3)
    throw new TokenRefused('malformed', 'not a compact JWT');
  try {
    const { payload } = await jwtVerify(token, publicKeyObject(issuerKey), {
      algorithms: ['EdDSA'],
      audience,
      issuer: issuerKey,
      clockTolerance: 30,
      currentDate: new Date(now),
    });
    return payload;
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw new TokenRefused('expired', 'the token has expired');
    if (err instanceof joseErrors.JWTClaimValidationFailed) {
      if (err.claim === 'aud') throw new TokenRefused('wrong_audience', `the token is not for ${audience}`);
      if (err.claim === 'iss') throw new TokenRefused('wrong_issuer', 'the token was not issued by this key');
    }
    if (err instanceof joseErrors.JWSSignatureVerificationFailed)
      throw new TokenRefused('bad_signature', 'the token signature does not verify');
    throw new TokenRefused('malformed', `the token cannot be read: ${(err as Error).message}`);
  }
}
