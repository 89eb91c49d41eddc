/**
 * Proof that the agent behind an advertised endpoint holds the SVID of the agent id it advertises
 * (docs/decisions.md #3a: mesh/public visibility needs a verified SVID). The coordinator sends a fresh random
 * challenge, with its own JWT-SVID as bearer (audience `amf-svid-proof:<id>`, good for nothing else); the agent answers with a JWT-SVID whose audience names
 * the coordinator and the challenge. A replayed or borrowed answer fails: the challenge is new each
 * time, and only the workload SPIRE attested as that SPIFFE ID can get an SVID with it.
 */
import { randomBytes } from 'node:crypto';
import { guardedFetch } from '../net/guardedFetch.js';
import type { IdentityProvider } from './identityProvider.js';

/** Where agents answer a proof request. */
export const SVID_PROOF_PATH = '/.well-known/amf/svid-proof';
/**
 * Audience prefix of the bearer on a proof request. The agent is not proven yet, so the token must
 * be worth nothing anywhere else: an endpoint that only claims an agent's id would otherwise get a
 * token it could replay to that agent. Agents accept this audience on the proof path only.
 */
export const PROOF_AUDIENCE_PREFIX = 'amf-svid-proof:';
/** Audience prefix carrying the challenge. */
export const CHALLENGE_AUDIENCE_PREFIX = 'amf-challenge:';
const CHALLENGE = /^[A-Za-z0-9_-]{22,128}$/;

export type SvidProof = { verified: true } | { verified: false; reason: string; message: string };

/** Agent side: the JWT-SVID that answers `challenge` for `caller` (an already verified SPIFFE ID). */
export async function answerSvidProof(
  identity: IdentityProvider,
  caller: string,
  challenge: unknown,
): Promise<{ svid: string }> {
  if (typeof challenge !== 'string' || !CHALLENGE.test(challenge))
    throw new TypeError('challenge must be 22-128 base64url characters');
  return { svid: await identity.jwtSvid([caller, `${CHALLENGE_AUDIENCE_PREFIX}${challenge}`]) };
}

/** Options of {@link requestSvidProof}. */
export interface SvidProofRequest {
  identity: IdentityProvider;
  /** The advertised agent id that must be proven. */
  agentId: string;
  /** The advertised endpoint (the proof is asked there, and only there). */
  endpoint: string;
  timeoutMs?: number;
}

/** Coordinator side: asks the agent for a proof and verifies it. Never throws. */
export async function requestSvidProof(req: SvidProofRequest): Promise<SvidProof> {
  const own = req.identity.agentId;
  if (req.identity.mode !== 'spiffe' || !own)
    return {
      verified: false,
      reason: 'svid_unavailable',
      message: 'SPIFFE is not active on the coordinator',
    };
  const challenge = randomBytes(24).toString('base64url');
  let answer: unknown;
  try {
    const bearer = await req.identity.jwtSvid([`${PROOF_AUDIENCE_PREFIX}${req.agentId}`]);
    const base = new URL(req.endpoint);
    const url = new URL(base.origin);
    url.pathname = `${base.pathname.replace(/\/$/, '')}${SVID_PROOF_PATH}`;
    url.searchParams.set('challenge', challenge);
    const res = await guardedFetch(
      url,
      { headers: { authorization: `Bearer ${bearer}`, accept: 'application/json' } },
      {
        what: 'SVID proof',
        host: new URL(req.endpoint).hostname,
        hostRole: 'the advertised endpoint host',
        loopbackIsOneHost: false,
        redirects: 'refuse',
        timeoutMs: req.timeoutMs ?? 3000,
        maxBytes: 16 * 1024,
        buffer: true,
      },
    );
    if (!res.ok) {
      await res.body?.cancel();
      return {
        verified: false,
        reason: 'svid_proof_failed',
        message: `the agent answered HTTP ${res.status}`,
      };
    }
    answer = await res.json();
  } catch (err) {
    return { verified: false, reason: 'svid_proof_failed', message: (err as Error).message };
  }
  const svid = (answer as { svid?: unknown } | null)?.svid;
  if (typeof svid !== 'string')
    return { verified: false, reason: 'svid_proof_failed', message: 'the answer has no "svid" string' };
  const check = await req.identity.verifyJwtSvid(svid, own);
  if (!check.ok) return { verified: false, reason: 'svid_invalid', message: check.message };
  if (check.spiffeId !== req.agentId)
    return {
      verified: false,
      reason: 'svid_subject_mismatch',
      message: `the SVID is for ${check.spiffeId}, not the advertised ${req.agentId}`,
    };
  if (!check.audience.includes(`${CHALLENGE_AUDIENCE_PREFIX}${challenge}`))
    return {
      verified: false,
      reason: 'svid_challenge_mismatch',
      message: 'the SVID does not answer our challenge',
    };
  return { verified: true };
}
