/**
 * Verifies JWT-SVIDs (the SPIFFE JWT-SVID standard) against the JWT bundles of the trust domains we
 * know: the signing key must be in the bundle of the trust domain named by `sub`, `sub` must be a
 * SPIFFE ID, `aud` must contain the expected audience, `exp` must be in the future. Failures carry a
 * stable reason code, so an agent can answer 401 with what was wrong.
 */
import { createLocalJWKSet, decodeJwt, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { parseSpiffeId } from './spiffeId.js';

/** Algorithms the JWT-SVID standard allows (never `none`, never HMAC). */
export const JWT_SVID_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'ES256',
  'ES384',
  'ES512',
  'PS256',
  'PS384',
  'PS512',
];
/** Longest token accepted (SPIRE's are well under 2 KiB). */
export const MAX_JWT_SVID_CHARS = 8192;
/** Clock skew tolerated between the signer and us. */
const CLOCK_TOLERANCE_SECONDS = 5;

/** Why a JWT-SVID was refused. */
export type JwtSvidRefusal =
  | 'malformed'
  | 'not_spiffe'
  | 'unknown_trust_domain'
  | 'bad_signature'
  | 'expired'
  | 'wrong_audience'
  | 'invalid_claims';

/** What a verified JWT-SVID says. */
export interface VerifiedJwtSvid {
  spiffeId: string;
  trustDomain: string;
  audience: string[];
  /** Unix seconds. */
  expiresAt: number;
  issuedAt?: number;
}

export type JwtSvidCheck =
  ({ ok: true } & VerifiedJwtSvid) | { ok: false; reason: JwtSvidRefusal; message: string };

/** The JWKS of each trust domain (keyed by trust domain name, without `spiffe://`). */
export type JwtBundles = ReadonlyMap<string, JSONWebKeySet>;

/** Options of one verification. */
export interface VerifyOptions {
  /** Current time (tests only); default now. */
  now?: Date;
}

function refuse(reason: JwtSvidRefusal, message: string): JwtSvidCheck {
  return { ok: false, reason, message };
}

/** Keeps the keys usable for JWT-SVIDs and drops `use` (SPIFFE bundles say `jwt-svid`; jose wants `sig`). */
export function jwtSvidKeys(jwks: JSONWebKeySet): JSONWebKeySet {
  const keys = (Array.isArray(jwks.keys) ? jwks.keys : [])
    .filter((k) => k.use === undefined || k.use === 'jwt-svid' || k.use === 'sig')
    .map(({ use: _use, ...k }) => k);
  return { keys };
}

/** Verifies JWT-SVIDs against bundles that may be replaced at any time (rotation). */
export class JwtSvidVerifier {
  private cache = new WeakMap<JSONWebKeySet, ReturnType<typeof createLocalJWKSet>>();

  constructor(private readonly bundles: () => JwtBundles) {}

  /** Verifies `token` for `audience` (one audience that must appear in `aud`). */
  async verify(token: string, audience: string, options: VerifyOptions = {}): Promise<JwtSvidCheck> {
    if (typeof token !== 'string' || token.length === 0 || token.length > MAX_JWT_SVID_CHARS)
      return refuse('malformed', `a JWT-SVID is a compact JWT of at most ${MAX_JWT_SVID_CHARS} characters`);
    let unverified: JWTPayload;
    try {
      unverified = decodeJwt(token);
    } catch {
      return refuse('malformed', 'the token is not a compact JWT');
    }
    const id = parseSpiffeId(unverified.sub);
    if (!id) return refuse('not_spiffe', 'the token subject (sub) is not a SPIFFE ID');
    const jwks = this.bundles().get(id.trustDomain);
    if (!jwks) return refuse('unknown_trust_domain', `no JWT bundle for trust domain ${id.trustDomain}`);
    let keySet = this.cache.get(jwks);
    if (!keySet) {
      keySet = createLocalJWKSet(jwtSvidKeys(jwks));
      this.cache.set(jwks, keySet);
    }
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keySet, {
        algorithms: JWT_SVID_ALGORITHMS,
        audience,
        requiredClaims: ['sub', 'aud', 'exp'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        ...(options.now ? { currentDate: options.now } : {}),
      }));
    } catch (err) {
      return classify(err, audience);
    }
    const aud = typeof payload.aud === 'string' ? [payload.aud] : (payload.aud ?? []);
    return {
      ok: true,
      spiffeId: id.id,
      trustDomain: id.trustDomain,
      audience: aud,
      expiresAt: payload.exp!,
      ...(payload.iat !== undefined ? { issuedAt: payload.iat } : {}),
    };
  }
}

/** Maps jose's error codes (stable strings, not messages) to our refusal reasons. */
function classify(err: unknown, audience: string): JwtSvidCheck {
  const code = (err as { code?: unknown }).code;
  const claim = (err as { claim?: unknown }).claim;
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return refuse('expired', 'the JWT-SVID has expired');
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if (claim === 'aud')
        return refuse('wrong_audience', `the JWT-SVID is not for this audience (expected ${audience})`);
      return refuse('invalid_claims', `the JWT-SVID claim ${String(claim)} is invalid`);
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
    case 'ERR_JWKS_NO_MATCHING_KEY':
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return refuse('bad_signature', 'the JWT-SVID is not signed by a key of its trust domain bundle');
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return refuse('bad_signature', 'the JWT-SVID uses an algorithm the JWT-SVID standard does not allow');
    default:
      return refuse('malformed', 'the JWT-SVID could not be verified');
  }
}
