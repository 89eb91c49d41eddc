/**
 * The agent side of "SPIFFE active: the coordinator presents a JWT-SVID as `Authorization: Bearer`
 * on every call": checks the header against the trust bundle with the audience this agent answers to
 * (its own SPIFFE ID, or a configured one). The refusal says what was wrong, for the 401 body and the
 * `WWW-Authenticate` header (RFC 6750 `error="invalid_token"`).
 */
import type { IdentityProvider } from './identityProvider.js';
import type { JwtSvidRefusal } from './jwtSvidVerifier.js';

/** Why a call was refused. */
export type BearerRefusal = 'missing_bearer' | JwtSvidRefusal | 'caller_not_allowed';

export type BearerCheck =
  | { ok: true; caller: string }
  | { ok: false; reason: BearerRefusal; message: string; wwwAuthenticate: string };

/** Options of {@link checkBearer}. */
export interface BearerOptions {
  identity: IdentityProvider;
  /** The audience a token must name (default: this agent's SPIFFE ID). */
  audience?: string;
  /** Which callers may call (default: anyone with a valid SVID of a known trust domain). */
  callerAllowed?: (spiffeId: string) => boolean;
}

const BEARER = /^Bearer ([A-Za-z0-9_.~+/-]+=*)$/;

function refused(reason: BearerRefusal, message: string): BearerCheck {
  const quoted = message.replace(/["\\]/g, "'");
  const error = reason === 'missing_bearer' ? '' : ', error="invalid_token"';
  return {
    ok: false,
    reason,
    message,
    wwwAuthenticate: `Bearer realm="amf"${error}, error_description="${quoted}"`,
  };
}

/** Checks one request's Authorization header. */
export async function checkBearer(
  authorization: string | undefined,
  options: BearerOptions,
): Promise<BearerCheck> {
  const match = authorization ? BEARER.exec(authorization) : null;
  if (!match)
    return refused(
      'missing_bearer',
      'SPIFFE is active: this agent needs a JWT-SVID as Authorization: Bearer',
    );
  const audience = options.audience ?? options.identity.agentId;
  if (!audience)
    return refused('unknown_trust_domain', 'this agent has no SPIFFE ID to be the audience of a token');
  const check = await options.identity.verifyJwtSvid(match[1]!, audience);
  if (!check.ok) return refused(check.reason, check.message);
  if (options.callerAllowed && !options.callerAllowed(check.spiffeId))
    return refused('caller_not_allowed', `${check.spiffeId} may not call this agent`);
  return { ok: true, caller: check.spiffeId };
}
