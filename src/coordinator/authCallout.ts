/**
 * The coordinator's NATS auth callout responder (docs/security.md, "Per-agent users on an external
 * NATS or the cluster"). A server configured with `auth_callout` asks on `$SYS.REQ.USER.AUTH` who
 * may log in; every coordinator of the mesh answers in one queue group, so one coordinator down
 * loses no login. It decides exactly as the spawned server's config would:
 *
 * - nkey + signature over the server's nonce: an agent that is **live** and bound to that key gets
 *   `agentPermissions()` for its admitted tags; any other key is refused;
 * - user/password of a role or of the join user (constant-time comparison): that user's permissions;
 * - anything else: refused.
 *
 * Every grant is a user JWT that expires after `ttlSeconds`: the server then disconnects the client,
 * which reconnects and is judged again, so a revoked agent is out at its next renewal at the latest.
 */
import { timingSafeEqual } from 'node:crypto';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { agentPermissions, JOIN_PERMISSIONS } from '../fabric/agentUsers.js';
import type { CalloutIssuer } from '../identity/calloutIssuer.js';
import {
  CalloutRequestError,
  encodeCalloutResponse,
  nonceSignatureValid,
  readAuthorizationRequest,
  type CalloutGrant,
  type CalloutRequest,
} from '../identity/calloutJwt.js';
import { NATS_ROLES, type NatsCredentials, type RoleCredential } from '../fabric/credentials.js';
import { ROLE_PERMISSIONS } from '../fabric/natsServer/config.js';
import type { LogFn } from '../log.js';

/** The subject nats-server sends authorization requests on. */
export const AUTH_CALLOUT_SUBJECT = '$SYS.REQ.USER.AUTH';
/** The header in which a server that encrypts (xkey) names its curve key for the answer. */
export const SERVER_XKEY_HEADER = 'Nats-Server-Xkey';
/** Queue group of every coordinator's responder. */
export const AUTH_CALLOUT_QUEUE = 'amf-callout';
/** Requests handled at once; beyond, a request is left unanswered (the server times it out). */
const MAX_IN_FLIGHT = 256;

/** Why a login was refused (stable: in warnings and logs). */
export type CalloutRefusal =
  'bad_signature' | 'no_nonce' | 'key_not_admitted' | 'wrong_password' | 'unknown_user' | 'no_credentials';

/** One refused login, for the coordinator's warning. */
export interface RefusedLogin {
  reason: CalloutRefusal;
  /** The key or user name the client claimed (never a password). */
  claimed: string;
  host?: string;
  server: string;
}

export interface AuthCalloutOptions {
  nc: NatsConnection;
  issuer: CalloutIssuer;
  credentials: NatsCredentials;
  join: RoleCredential;
  /** The live agent bound to `nkey`, with the tags it was admitted for; undefined otherwise. */
  liveAgent: (nkey: string) => { agentId: string; tags: readonly string[] } | undefined;
  /** Lifetime of every user JWT issued. */
  ttlSeconds: number;
  onRefused: (refusal: RefusedLogin) => void;
  log: LogFn;
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  // Compare equal-length buffers only; the length check leaks the length, not the content.
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The outcome for one checked request (pure apart from the registry lookup). */
export function decideLogin(
  req: CalloutRequest,
  opts: Pick<AuthCalloutOptions, 'credentials' | 'join' | 'liveAgent' | 'ttlSeconds'>,
): CalloutGrant | { refusal: CalloutRefusal; claimed: string } {
  const ttlSeconds = opts.ttlSeconds;
  if (req.nkey !== undefined) {
    // The server leaves the nonce signature to the callout: without this check a key is a claim.
    if (req.nonce === undefined || req.sig === undefined) return { refusal: 'no_nonce', claimed: req.nkey };
    if (!nonceSignatureValid(req.nkey, req.nonce, req.sig))
      return { refusal: 'bad_signature', claimed: req.nkey };
    const agent = opts.liveAgent(req.nkey);
    if (!agent) return { refusal: 'key_not_admitted', claimed: req.nkey };
    return {
      name: agent.agentId,
      permissions: agentPermissions({ nkey: req.nkey, tags: agent.tags }),
      ttlSeconds,
    };
  }
  if (req.user !== undefined) {
    const pass = req.pass ?? '';
    if (req.user === opts.join.user) {
      return sameSecret(pass, opts.join.password)
        ? { name: req.user, permissions: JOIN_PERMISSIONS, ttlSeconds }
        : { refusal: 'wrong_password', claimed: req.user };
    }
    for (const role of NATS_ROLES) {
      const cred = opts.credentials[role];
      if (req.user !== cred.user) continue;
      return sameSecret(pass, cred.password)
        ? { name: req.user, permissions: ROLE_PERMISSIONS[role], ttlSeconds }
        : { refusal: 'wrong_password', claimed: req.user };
    }
    return { refusal: 'unknown_user', claimed: req.user };
  }
  return { refusal: 'no_credentials', claimed: req.host ?? 'anonymous client' };
}

const REFUSAL_TEXT: Readonly<Record<CalloutRefusal, string>> = {
  bad_signature: 'the nonce signature does not match the key',
  no_nonce: 'the server sent no nonce to sign (configure the nonce anchor nkey user)',
  key_not_admitted: 'no live agent is admitted with this key',
  wrong_password: 'wrong password',
  unknown_user: 'unknown user',
  no_credentials: 'no credentials',
};

/** A running responder; `close()` unsubscribes (the connection stays the caller's). */
export interface AuthCalloutResponder {
  /** Logins granted and refused so far (tests, metrics). */
  readonly counts: { granted: number; refused: number };
  close(): void;
}

/** Subscribes the responder on `opts.nc` (a coordinator connection, which may publish anywhere). */
export function startAuthCallout(opts: AuthCalloutOptions): AuthCalloutResponder {
  const counts = { granted: 0, refused: 0 };
  let inFlight = 0;
  const answer = async (msg: Msg): Promise<void> => {
    // A server with `auth_callout.xkey` seals each request to our curve key and names its own (one
    // per request) in this header; the answer is sealed back to it.
    const serverXkey = msg.headers?.get(SERVER_XKEY_HEADER) || undefined;
    const respond = (jwt: string) => {
      const bytes = new TextEncoder().encode(jwt);
      msg.respond(serverXkey ? opts.issuer.xkey.seal(bytes, serverXkey) : bytes);
    };
    let req: CalloutRequest;
    try {
      const plain = serverXkey ? opts.issuer.xkey.open(msg.data, serverXkey) : msg.data;
      if (!plain) throw new CalloutRequestError("sealed to another key than this mesh's xkey");
      req = readAuthorizationRequest(plain);
    } catch (err) {
      // Nothing can be addressed to an unreadable request; the server's wait runs out and it refuses.
      opts.log('warn', 'auth callout: unreadable authorization request ignored', {
        err: err instanceof CalloutRequestError ? err.message : String(err),
      });
      return;
    }
    const outcome = decideLogin(req, opts);
    if ('refusal' in outcome) {
      counts.refused += 1;
      opts.onRefused({
        reason: outcome.refusal,
        claimed: outcome.claimed,
        server: req.serverName,
        ...(req.host !== undefined ? { host: req.host } : {}),
      });
      respond(
        await encodeCalloutResponse(req, opts.issuer.pair, {
          error: `AMF refused ${outcome.claimed}: ${REFUSAL_TEXT[outcome.refusal]}`,
        }),
      );
      return;
    }
    counts.granted += 1;
    respond(await encodeCalloutResponse(req, opts.issuer.pair, outcome));
  };
  const sub: Subscription = opts.nc.subscribe(AUTH_CALLOUT_SUBJECT, {
    queue: AUTH_CALLOUT_QUEUE,
    callback: (err, msg) => {
      if (err) {
        opts.log('warn', 'auth callout subscription failed', { err: err.message });
        return;
      }
      if (!msg.reply) return;
      if (inFlight >= MAX_IN_FLIGHT) {
        opts.log('warn', 'auth callout: too many logins at once; one left to the server time-out');
        return;
      }
      inFlight += 1;
      answer(msg)
        .catch((e: unknown) =>
          opts.log('error', 'auth callout: answering failed', {
            err: e instanceof Error ? e.message : String(e),
          }),
        )
        .finally(() => {
          inFlight -= 1;
        });
    },
  });
  return { counts, close: () => sub.unsubscribe() };
}
