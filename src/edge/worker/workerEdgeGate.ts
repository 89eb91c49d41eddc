/**
 * Who may call a worker's HTTP edge (docs/security.md, "Worker edges"). A worker's `POST /tasks/send`
 * runs its handler in its own name, so it takes only three credentials, as
 * `Authorization: Bearer`:
 *
 * - the coordinator's bearer: a short-lived token signed with the coordinator's key
 *   (identity/coordinatorKey.ts, identity/signedToken.ts) for this agent's id, checked against the
 *   coordinator's public key the worker learned when it joined;
 * - the operator key (identity/operatorKey.ts), compared in constant time;
 * - a JWT-SVID for this agent, when SPIFFE is active (http/svidGate.ts).
 *
 * The client protocol endpoints (`/a2a`, `/a2a/...`, `/mcp`) follow the coordinator's rule: open to a
 * caller whose socket is on loopback, any of the three credentials from anywhere else. Under SPIFFE
 * every path but discovery needs one, loopback included, as before. Discovery (the agent cards,
 * `/health`) is always open: a caller must read the card before it knows whom to ask for a token.
 * A refusal is 401 with a reason code and a sentence that says what was expected.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { decodeJwt } from 'jose';
import { sendJson } from '../../http/httpKit.js';
import { checkBearer, type BearerOptions } from '../../identity/bearerAuth.js';
import { readCoordinatorPublicKey } from '../../identity/coordinatorKey.js';
import { readOperatorKey } from '../../identity/operatorKey.js';
import { TokenRefused, verifyToken } from '../../identity/signedToken.js';
import { SVID_PROOF_PATH } from '../../identity/svidProof.js';
import { isLoopbackHost } from '../../net/hostRules.js';
import { BoundedCache } from '../../util/boundedCache.js';
import { svidGate, type RequestGate } from '../../http/svidGate.js';

/** Paths anyone may read (GET/HEAD): discovery comes before any credential. */
const DISCOVERY_PATHS: ReadonlySet<string> = new Set([
  '/.well-known/agent-card.json',
  '/.well-known/agent.json',
  '/health',
]);

/** The keys a worker checks callers against, learned when it joins (see {@link readWorkerEdgeKeys}). */
export interface WorkerEdgeKeys {
  /** The coordinator's public key (an nkey, `U...`): its bearers verify against it. */
  coordinatorKey?: string;
  /** The mesh's operator key. */
  operatorKey?: string;
}

/** What the gate of one worker needs. */
export interface WorkerEdgeGateOptions extends WorkerEdgeKeys {
  /** This worker's agent id: the audience a coordinator bearer must name. */
  agentId: string;
  /** SPIFFE active: JWT-SVIDs are taken too, and every path but discovery needs a credential. */
  spiffe?: BearerOptions;
}

/** Who a request was let in as, when it showed a credential. */
type Caller = 'operator' | 'coordinator' | { spiffeId: string };

/** Why a request was refused: a stable code and a sentence. */
interface Refusal {
  reason: string;
  message: string;
}

/** How a path is guarded. */
type PathRule = 'open' | 'credential' | 'loopback_or_credential';

/** The client protocol endpoints, which ordinary clients on this machine reach without a key. */
function isClientProtocolPath(pathname: string): boolean {
  return pathname === '/a2a' || pathname.startsWith('/a2a/') || pathname === '/mcp';
}

function ruleFor(method: string | undefined, pathname: string, spiffe: boolean): PathRule {
  if ((method === 'GET' || method === 'HEAD') && DISCOVERY_PATHS.has(pathname)) return 'open';
  if (spiffe) return 'credential';
  if (pathname === '/tasks/send') return 'credential';
  if (isClientProtocolPath(pathname)) return 'loopback_or_credential';
  // The AFM agent's own interfaces (`/chat`, `/webhook`, `/`) keep their own rules.
  return 'open';
}

/** True when the request's socket comes from a loopback address (never a header: those are the caller's). */
function fromLoopback(req: IncomingMessage): boolean {
  const address = req.socket.remoteAddress;
  return address !== undefined && isLoopbackHost(address);
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** The issuer a JWT names, unverified (to pick the check that applies), or undefined. */
function unverifiedIssuer(token: string): string | undefined {
  try {
    const iss = decodeJwt(token).iss;
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}

/** Verified coordinator bearers are kept until they expire: one Ed25519 check per token, not per call. */
const VERIFIED_TOKENS = 256;
const VERIFIED_TOKEN_KEEP_MS = 10 * 60_000;

/**
 * Builds the gate of a worker's edge. Without any key and without SPIFFE, `/tasks/send` takes
 * nobody (and says why): a worker started on its own has no owner to take direct tasks from.
 */
export function workerEdgeGate(options: WorkerEdgeGateOptions): RequestGate {
  const operatorDigest = options.operatorKey ? digest(options.operatorKey) : undefined;
  const proofGate = options.spiffe ? svidGate(options.spiffe) : undefined;
  const verified = new BoundedCache<number>(VERIFIED_TOKENS, VERIFIED_TOKEN_KEEP_MS);
  const accepted = [
    ...(options.coordinatorKey ? ["the coordinator's bearer"] : []),
    ...(operatorDigest ? ['the operator key'] : []),
    ...(options.spiffe ? ['a JWT-SVID for this agent'] : []),
  ];
  const expected =
    accepted.length > 0
      ? `Authorization: Bearer with ${accepted.join(', or ')}`
      : 'a credential, but this worker was started without the coordinator key, the operator key or SPIFFE, so it takes none';

  const authenticate = async (req: IncomingMessage): Promise<Caller | Refusal> => {
    const header = req.headers.authorization;
    const match = typeof header === 'string' ? BEARER.exec(header) : null;
    if (!match) return { reason: 'missing_bearer', message: `this path needs ${expected}` };
    const token = match[1]!;
    if (operatorDigest && timingSafeEqual(digest(token), operatorDigest)) return 'operator';
    const coordinatorKey = options.coordinatorKey;
    if (coordinatorKey && unverifiedIssuer(token) === coordinatorKey) {
      const expiresAt = verified.get(token);
      if (expiresAt !== undefined && expiresAt > Date.now()) return 'coordinator';
      try {
        const claims = await verifyToken(token, coordinatorKey, options.agentId);
        verified.set(token, (claims.exp ?? 0) * 1000);
        return 'coordinator';
      } catch (err) {
        if (err instanceof TokenRefused) return { reason: err.reason, message: err.message };
        throw err;
      }
    }
    if (options.spiffe) {
      const check = await checkBearer(header, options.spiffe);
      return check.ok ? { spiffeId: check.caller } : { reason: check.reason, message: check.message };
    }
    return {
      reason: 'invalid_credential',
      message: `the bearer is not accepted here: this path needs ${expected}`,
    };
  };

  return async (req, res, url) => {
    // The SVID proof takes the proof audience only, and is answered for the verified caller.
    if (proofGate && url.pathname === SVID_PROOF_PATH) return proofGate(req, res, url);
    const rule = ruleFor(req.method, url.pathname, options.spiffe !== undefined);
    if (rule === 'open') return true;
    if (rule === 'loopback_or_credential' && fromLoopback(req)) return true;
    const outcome = await authenticate(req);
    if (typeof outcome === 'string' || 'spiffeId' in outcome) return true;
    refuse(res, outcome);
    return false;
  };
}

function refuse(res: ServerResponse, refusal: Refusal): void {
  const quoted = refusal.message.replace(/["\\]/g, "'");
  const error = refusal.reason === 'missing_bearer' ? '' : ', error="invalid_token"';
  sendJson(
    res,
    401,
    { error: { code: 'UNAUTHORIZED', reason: refusal.reason, message: refusal.message } },
    { 'www-authenticate': `Bearer realm="amf"${error}, error_description="${quoted}"` },
  );
}

/**
 * The keys a worker started from a data dir trusts: the coordinator's public key
 * (`coordinator.pub`) and the operator key (`configuredKey` — `AMF_API_KEY` — else `operator.key`).
 * On one machine the data dir is the invite; absent files leave the key out.
 */
export async function readWorkerEdgeKeys(
  dataDir: string,
  configuredKey?: string | null,
): Promise<WorkerEdgeKeys> {
  const coordinatorKey = await readCoordinatorPublicKey(dataDir);
  const operatorKey = configuredKey || (await readOperatorKey(dataDir).catch(() => undefined));
  return {
    ...(coordinatorKey ? { coordinatorKey } : {}),
    ...(operatorKey ? { operatorKey } : {}),
  };
}
