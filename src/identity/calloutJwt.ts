/**
 * The JWTs of NATS auth callout, through `@nats-io/jwt` (no hand-rolled JWT code): the server's
 * authorization request is decoded and checked here, and the answer — a user JWT carrying the
 * permissions AMF grants, or an error — is encoded and signed with the issuer key.
 *
 * What the server sends (nats-server ≥ 2.10, no `xkey`): a JWT signed by the server's own nkey
 * (`iss` = `server_id.id`, an `N…` key), audience `nats-authorization-request`, whose `nats` claim
 * holds the client's `connect_opts` (user/pass, or nkey + sig), `client_info` (with the `nonce` the
 * server challenged it with) and `user_nkey`, a key the server made for this connection: the user
 * JWT must be issued to it. The response's audience is the server's key, its subject `user_nkey`.
 *
 * Ed25519 runs on node:crypto, not on the pure-JS code inside `@nats-io/jwt`, which is too slow for
 * a check and two signatures on every login (docs/performance.md): the request's signature is
 * checked here before its claims are parsed, and the issuer key pair handed to the encoders signs
 * with node:crypto (calloutIssuer.ts).
 */
import { verify as edVerify } from 'node:crypto';
import {
  encodeAuthorizationResponse,
  encodeUser,
  type AuthorizationRequest,
  type ClaimsData,
  type KeyPair,
  type Permissions,
} from '@nats-io/jwt';
import type { RolePermissions } from '../fabric/natsServer/config.js';
import { anyPublicKeyObject, publicKeyObject } from './nkeyPublic.js';

/** Requests larger than this are refused unread (a normal one is well under 2 KiB). */
export const MAX_AUTH_REQUEST_BYTES = 32 * 1024;

/** The part of a checked request the callout decides on (every field bounded and typed). */
export interface CalloutRequest {
  /** The server that asked (its nkey, `N…`): the response is addressed to it. */
  readonly serverKey: string;
  readonly serverName: string;
  /** The key the server made for this connection; the user JWT is issued to it. */
  readonly userNkey: string;
  /** The nonce the server challenged the client with (present when the server sent one). */
  readonly nonce?: string;
  readonly nkey?: string;
  readonly sig?: string;
  readonly user?: string;
  readonly pass?: string;
  /** Client-supplied connection name, for messages only. */
  readonly name?: string;
  /** The client's address as the server saw it. */
  readonly host?: string;
}

/** A request that could not be read: no answer can be addressed, the server's wait runs out. */
export class CalloutRequestError extends Error {
  override readonly name = 'CalloutRequestError';
}

const SERVER_KEY = /^N[A-Z2-7]{55}$/;
const USER_KEY = /^U[A-Z2-7]{55}$/;

function boundedString(v: unknown, what: string, max: number): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new CalloutRequestError(`${what} is not a string`);
  if (v.length > max) throw new CalloutRequestError(`${what} is longer than ${max} characters`);
  return v;
}

/** A server-key cache: a mesh has few servers, and each login would otherwise decode the key again. */
const serverKeys = new Map<string, ReturnType<typeof anyPublicKeyObject>>();

/** The claims of a NATS JWT (`ed25519-nkey`) whose signature verifies against its `iss` key. */
function verifiedClaims(jwt: string): ClaimsData<AuthorizationRequest> {
  const parts = jwt.split('.');
  const fail = (why: string): never => {
    throw new CalloutRequestError(`not a signed NATS JWT (${why}); is the server's xkey set?`);
  };
  if (parts.length !== 3) return fail(`${parts.length} parts`);
  const [head, body, sig] = parts as [string, string, string];
  let header: { typ?: unknown; alg?: unknown };
  let claims: ClaimsData<AuthorizationRequest>;
  try {
    header = JSON.parse(Buffer.from(head, 'base64url').toString('utf8')) as typeof header;
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as typeof claims;
  } catch {
    return fail('not JSON');
  }
  if (String(header.typ).toUpperCase() !== 'JWT' || header.alg !== 'ed25519-nkey') return fail('header');
  if (typeof claims?.iss !== 'string' || !SERVER_KEY.test(claims.iss))
    return fail('issuer is not a server key');
  let key = serverKeys.get(claims.iss);
  if (!key) {
    key = anyPublicKeyObject(claims.iss);
    if (serverKeys.size >= 1024) serverKeys.clear();
    serverKeys.set(claims.iss, key);
  }
  const signature = Buffer.from(sig, 'base64url');
  if (signature.length !== 64 || !edVerify(null, Buffer.from(`${head}.${body}`), key, signature))
    return fail('signature');
  return claims;
}

/**
 * Decodes and checks an authorization request: its size, its signature (by the key in `iss`), that
 * the signer is the server it names, its type, audience and expiry. Throws CalloutRequestError.
 */
export function readAuthorizationRequest(data: Uint8Array, nowSeconds = Date.now() / 1000): CalloutRequest {
  if (data.length > MAX_AUTH_REQUEST_BYTES)
    throw new CalloutRequestError(`request of ${data.length} bytes exceeds ${MAX_AUTH_REQUEST_BYTES}`);
  const claims = verifiedClaims(new TextDecoder('utf-8', { fatal: false }).decode(data));
  const req = claims.nats as Partial<AuthorizationRequest> | undefined;
  if (claims.aud !== 'nats-authorization-request' || req?.type !== 'authorization_request')
    throw new CalloutRequestError('not an authorization request');
  const serverKey = boundedString(req.server_id?.id, 'server_id.id', 56);
  if (serverKey === undefined || !SERVER_KEY.test(serverKey) || claims.iss !== serverKey)
    throw new CalloutRequestError('the request is not signed by the server it names');
  if (typeof claims.exp === 'number' && claims.exp < nowSeconds)
    throw new CalloutRequestError('the request has expired');
  const userNkey = boundedString(req.user_nkey, 'user_nkey', 56);
  if (userNkey === undefined || !USER_KEY.test(userNkey))
    throw new CalloutRequestError('the request names no valid user_nkey');
  const opts = (req.connect_opts ?? {}) as Record<string, unknown>;
  const info = (req.client_info ?? {}) as Record<string, unknown>;
  const fields: Record<string, string | undefined> = {
    nonce: boundedString(info.nonce, 'client_info.nonce', 256),
    nkey: boundedString(opts.nkey, 'connect_opts.nkey', 56),
    sig: boundedString(opts.sig, 'connect_opts.sig', 256),
    user: boundedString(opts.user, 'connect_opts.user', 256),
    pass: boundedString(opts.pass, 'connect_opts.pass', 1024),
    name: boundedString(opts.name, 'connect_opts.name', 256),
    host: boundedString(info.host, 'client_info.host', 256),
  };
  const present = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Record<
    string,
    string
  >;
  return {
    serverKey,
    serverName: boundedString(req.server_id?.name, 'server_id.name', 256) ?? serverKey,
    userNkey,
    ...present,
  };
}

/**
 * Whether `sig` (base64, standard or URL alphabet, as clients send it) is `nkey`'s Ed25519
 * signature of the server's nonce: the proof that the client holds the key it claims. Under auth
 * callout nats-server does not check it itself; the service must.
 */
export function nonceSignatureValid(nkey: string, nonce: string, sig: string): boolean {
  if (!USER_KEY.test(nkey)) return false;
  try {
    const signature = Buffer.from(sig, 'base64');
    if (signature.length !== 64) return false;
    return edVerify(null, Buffer.from(nonce, 'utf8'), publicKeyObject(nkey), signature);
  } catch {
    return false;
  }
}

/** AMF's permission table entry in the JWT form (`pub`, `sub`, `resp`). */
export function jwtPermissions(perms: RolePermissions): Permissions {
  const out: Permissions = {
    pub: { allow: [...perms.publish.allow], deny: [...perms.publish.deny] },
    sub: { allow: [...perms.subscribe.allow], deny: [...perms.subscribe.deny] },
  };
  if (perms.allowResponses) out.resp = { max: perms.allowResponses.max, ttl: 0 };
  return out;
}

/** What a granted login gets. */
export interface CalloutGrant {
  /** Shown by the server as the user's name (monitoring, logs). */
  name: string;
  permissions: RolePermissions;
  /** Lifetime of the user JWT: the server disconnects the client when it ends. */
  ttlSeconds: number;
}

/**
 * The signed response: a user JWT for `req.userNkey` in the global account (`$G`, where AMF's
 * users, streams and KV live) with the grant's permissions and expiry, or `error` (the server then
 * refuses the connect and tells the client "Authorization Violation").
 */
export async function encodeCalloutResponse(
  req: CalloutRequest,
  issuer: KeyPair,
  outcome: CalloutGrant | { error: string },
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<string> {
  if ('error' in outcome)
    return encodeAuthorizationResponse(req.userNkey, req.serverKey, issuer, { error: outcome.error }, {});
  const user = await encodeUser(
    outcome.name,
    req.userNkey,
    issuer,
    { ...jwtPermissions(outcome.permissions), bearer_token: false },
    // In a config-defined (non-operator) server the audience names the account to place the user in.
    { aud: '$G', exp: nowSeconds + outcome.ttlSeconds },
  );
  return encodeAuthorizationResponse(req.userNkey, req.serverKey, issuer, { jwt: user }, {});
}
