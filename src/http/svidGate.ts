/**
 * The worker edge under SPIFFE: every call but the public discovery paths must carry a JWT-SVID
 * bearer for this agent (its SPIFFE ID, or a configured audience), verified against the trust bundle;
 * anything else gets 401 with the reason (`missing_bearer`, `wrong_audience`, `expired`, ...). The
 * edge also answers the coordinator's SVID proof (identity/svidProof.ts) for the verified caller.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { checkBearer, type BearerOptions } from '../identity/bearerAuth.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import { answerSvidProof, PROOF_AUDIENCE_PREFIX, SVID_PROOF_PATH } from '../identity/svidProof.js';
import { sendJson, type Router } from './httpKit.js';

/** Paths anyone may read: discovery must work before a caller can know whom to ask a token for. */
const OPEN_PATHS: ReadonlySet<string> = new Set([
  '/.well-known/agent-card.json',
  '/.well-known/agent.json',
  '/health',
]);

/** Decides whether a request may reach the router (answers it itself when not). */
export type RequestGate = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean>;

const callers = new WeakMap<IncomingMessage, string>();

/** The SPIFFE ID whose bearer a request carried (after the gate let it through). */
export function verifiedCaller(req: IncomingMessage): string | undefined {
  return callers.get(req);
}

/** A gate that lets through only requests with a valid JWT-SVID bearer (open paths excepted). */
export function svidGate(options: BearerOptions): RequestGate {
  return async (req, res, url) => {
    if ((req.method === 'GET' || req.method === 'HEAD') && OPEN_PATHS.has(url.pathname)) return true;
    // The proof path takes the proof audience only, and no other path takes it (svidProof.ts).
    const own = options.audience ?? options.identity.agentId;
    const check = await checkBearer(
      req.headers.authorization,
      url.pathname === SVID_PROOF_PATH && own !== undefined
        ? { ...options, audience: `${PROOF_AUDIENCE_PREFIX}${own}` }
        : options,
    );
    if (!check.ok) {
      sendJson(
        res,
        401,
        { error: { code: 'UNAUTHORIZED', reason: check.reason, message: check.message } },
        { 'www-authenticate': check.wwwAuthenticate },
      );
      return false;
    }
    callers.set(req, check.caller);
    return true;
  };
}

/** Adds `GET /.well-known/amf/svid-proof?challenge=...` (behind the gate: the caller is verified). */
export function addSvidProofRoute(router: Router, identity: IdentityProvider): Router {
  return router.on('GET', SVID_PROOF_PATH, async (req, res, url) => {
    const caller = verifiedCaller(req);
    if (!caller) {
      sendJson(res, 401, {
        error: { code: 'UNAUTHORIZED', reason: 'missing_bearer', message: 'no verified caller' },
      });
      return;
    }
    try {
      sendJson(res, 200, await answerSvidProof(identity, caller, url.searchParams.get('challenge')));
    } catch (err) {
      const bad = err instanceof TypeError;
      sendJson(res, bad ? 400 : 503, {
        error: { code: bad ? 'INVALID_REQUEST' : 'UNAVAILABLE', message: (err as Error).message },
      });
    }
  });
}
