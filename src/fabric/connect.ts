/**
 * The one way AMF processes connect to NATS: as a role user, with that role's private inbox prefix
 * (the ACLs only let a role read its own inboxes), and with auth failures turned into an error that
 * says which user was refused where.
 */
import {
  connect,
  errors,
  nkeyAuthenticator,
  type Authenticator,
  type NatsConnection,
  type NodeConnectionOptions,
} from '@nats-io/transport-node';
import { agentInboxPrefix } from './agentUsers.js';
import { coalesceWrites } from './coalescedWrites.js';
import type { RoleCredential } from './credentials.js';
import { inboxPrefixFor } from './natsServer/config.js';
import { AmfError } from '../errors.js';

export type { NatsConnection };

/** Raised when the server refuses the user/password; `code` is stable for callers to branch on. */
export class NatsAuthError extends AmfError {
  declare readonly code: 'NATS_AUTH_FAILED';
  readonly user: string;
  readonly url: string;

  constructor(user: string, url: string, options?: ErrorOptions) {
    super(
      'NATS_AUTH_FAILED',
      `NATS at ${url} refused user "${user}": wrong password or unknown user ` +
        `(check <data-dir>/credentials.json and the AMF_*_PASS variables)`,
      undefined,
      options,
    );
    this.name = 'NatsAuthError';
    this.user = user;
    this.url = url;
  }
}

/**
 * Splits a comma-separated server list (`nats://a:4222,nats://b:4222`, the form `--nats-url` takes
 * for a cluster) into the array nats.js wants: given the whole string it would treat it as one
 * malformed host. With several seeds the client fails over to another node when its node dies.
 */
export function natsServers(url: string): string[] {
  return url
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** Options of {@link connectAs}. */
export interface ConnectAsOptions {
  /** Reconnect attempts after a lost connection (-1 = forever); the nats.js default when omitted. */
  maxReconnectAttempts?: number;
  /** Wait between reconnect attempts in ms; the nats.js default (2 s) when omitted. */
  reconnectTimeWait?: number;
  /** How long the first dial may take in ms; the nats.js default (20 s) when omitted. */
  dialTimeoutMs?: number;
}

/**
 * Reconnect settings of a long-lived mesh connection (coordinator, worker, AFM agent): retry
 * forever, about once a second, so an outage of any length ends with the process connected again
 * instead of a closed connection (the nats.js default gives up after 10 attempts, about 20 s).
 */
export const RECONNECT_FOREVER: ConnectAsOptions = { maxReconnectAttempts: -1, reconnectTimeWait: 1000 };

/** Every AMF connection writes once per event-loop turn (coalescedWrites.ts). */
function coalesced(nc: NatsConnection): NatsConnection {
  coalesceWrites(nc);
  return nc;
}

/** One connection attempt as a role user (see {@link connectAs}). */
async function connectOnce(
  url: string,
  cred: RoleCredential,
  name: string,
  opts: ConnectAsOptions,
): Promise<NatsConnection> {
  const options: NodeConnectionOptions = {
    servers: natsServers(url),
    user: cred.user,
    pass: cred.password,
    name,
    inboxPrefix: inboxPrefixFor(cred.user),
    // Every request (JetStream publishes and acks included) would otherwise build two Error objects
    // up front to keep the caller's stack for a possible timeout: measurable on the task path.
    noAsyncTraces: true,
  };
  if (opts.maxReconnectAttempts !== undefined) options.maxReconnectAttempts = opts.maxReconnectAttempts;
  if (opts.reconnectTimeWait !== undefined) options.reconnectTimeWait = opts.reconnectTimeWait;
  try {
    return coalesced(await connect(options));
  } catch (err) {
    if (err instanceof errors.AuthorizationError) throw new NatsAuthError(cred.user, url, { cause: err });
    if (isRefused(err)) throw new NatsUnreachableError(url, { cause: err });
    throw err;
  }
}

/**
 * Connects to `url` as the given role user. The connection `name` shows up in the server's
 * monitoring so an operator can tell agents apart. The inbox prefix is derived from the user so that
 * request/reply and JetStream replies land on subjects the role is allowed to subscribe to.
 *
 * A user that exists may still be refused for a moment: nats-server turns logins away while a reload
 * swaps its users (each admission and revocation reloads them), and a loaded machine may not finish
 * the handshake within the client's 20 s. So a refusal is tried again a few times (about 2 s in all)
 * before it counts, and a dial time-out for up to a minute; a refused TCP connection (nothing
 * listens) counts at once.
 */
export async function connectAs(
  url: string,
  cred: RoleCredential,
  name: string,
  opts: ConnectAsOptions = {},
): Promise<NatsConnection> {
  const deadline = Date.now() + 60_000;
  for (let refusals = 0; ;) {
    try {
      return await connectOnce(url, cred, name, opts);
    } catch (err) {
      if (err instanceof NatsAuthError && ++refusals < 5) {
        await new Promise((resolve) => setTimeout(resolve, 200 * refusals));
        continue;
      }
      if (err instanceof errors.TimeoutError && Date.now() < deadline) continue;
      throw err;
    }
  }
}

/** What {@link connectAsAgent} needs of an agent's key (identity/agentKey.ts). */
export interface AgentNkey {
  readonly publicKey: string;
  readonly seed: Uint8Array;
  /** Ed25519 over `data`, base64url (agentKey.ts: libsodium, far faster than nats.js's pure JS). */
  sign?(data: Uint8Array): string;
}

/** Answers the server's nonce challenge, with the key's own signer when it has one. */
export function agentAuthenticator(key: AgentNkey): Authenticator {
  const { sign } = key;
  if (!sign) return nkeyAuthenticator(key.seed);
  return (nonce?: string) => ({
    nkey: key.publicKey,
    // Standard base64, as nats.js's own authenticator sends it.
    sig: nonce ? Buffer.from(sign(new TextEncoder().encode(nonce)), 'base64url').toString('base64') : '',
  });
}

/**
 * Connects as an admitted agent's own nkey user (the server challenges, the seed signs the nonce),
 * with the agent's private inbox prefix. Refused (NatsAuthError) until the coordinator has granted
 * the key, i.e. until the agent is admitted.
 */
export async function connectAsAgent(
  url: string,
  key: AgentNkey,
  name: string,
  opts: ConnectAsOptions = {},
): Promise<NatsConnection> {
  const options: NodeConnectionOptions = {
    servers: natsServers(url),
    authenticator: agentAuthenticator(key),
    name,
    inboxPrefix: agentInboxPrefix(key.publicKey),
    // While the agent is not admitted (revoked, or a restarted server) the server refuses its key;
    // its heartbeats on the join connection get it re-admitted, and this connection then gets back in.
    ignoreAuthErrorAbort: true,
    // As in connectOnce: no two Error objects built per request (a worker's finals, acks and pulls).
    noAsyncTraces: true,
    // Only the nodes given (the coordinator's card lists them all): with the nodes a cluster gossips
    // added, a refused first login would cycle through them until admitted, never back to joinFabric.
    ignoreClusterUpdates: true,
  };
  if (opts.maxReconnectAttempts !== undefined) options.maxReconnectAttempts = opts.maxReconnectAttempts;
  if (opts.reconnectTimeWait !== undefined) options.reconnectTimeWait = opts.reconnectTimeWait;
  if (opts.dialTimeoutMs !== undefined) options.timeout = opts.dialTimeoutMs;
  try {
    return coalesced(await connect(options));
  } catch (err) {
    if (err instanceof errors.AuthorizationError)
      throw new NatsAuthError(`nkey ${key.publicKey}`, url, { cause: err });
    if (isRefused(err)) throw new NatsUnreachableError(url, { cause: err });
    throw err;
  }
}

/** Thrown when nothing listens at the NATS URL: names the URL and the usual cause. */
export class NatsUnreachableError extends AmfError {
  constructor(url: string, options?: { cause?: unknown }) {
    super(
      'UNAVAILABLE',
      `NATS at ${url} refused the connection: is the coordinator running, and started with --host ` +
        `on an address this machine can reach (it binds 127.0.0.1 unless told)?`,
      undefined,
      options,
    );
  }
}

/** True when `err` is a TCP refusal (nothing listens), which no retry will fix soon. */
function isRefused(err: unknown): boolean {
  return (err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED';
}

/**
 * A dial that did not finish, as opposed to a refusal: the handshake timed out (a loaded machine, a
 * server busy reloading its users) or the connection dropped before it. Worth another try.
 */
export function isPassingDialFailure(err: unknown): boolean {
  // A refusal while joining is usually a server being restarted: worth trying until the deadline.
  return (
    err instanceof errors.TimeoutError ||
    err instanceof errors.ConnectionError ||
    err instanceof NatsUnreachableError
  );
}

/** Drains `nc` (flushing what was published), or closes it when the drain does not end in time. */
export async function drainOrClose(nc: NatsConnection, timeoutMs: number): Promise<void> {
  if (nc.isClosed()) return;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([nc.drain().then(() => 'drained' as const), timedOut]).catch(
    () => 'failed' as const,
  );
  clearTimeout(timer);
  if (outcome !== 'drained') await nc.close().catch(() => undefined);
}
