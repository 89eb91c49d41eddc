/**
 * Turns the auth callout on for a coordinator on an external NATS or a cluster (`nats.auth_callout`,
 * docs/security.md) and ties it to the coordinator once that exists: the registry decides which keys
 * are live agents, and refused logins become `amf.policy.warning` `permission_violation`.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfConfig } from '../config/configTypes.js';
import {
  calloutKeyFile,
  loadOrCreateCalloutIssuer,
  readCalloutIssuer,
  type CalloutIssuer,
} from '../identity/calloutIssuer.js';
import { connectAs, RECONNECT_FOREVER } from '../fabric/connect.js';
import {
  readSystemCredentialIfPresent,
  type NatsCredentials,
  type RoleCredential,
} from '../fabric/credentials.js';
import type { LogFn } from '../log.js';
import type { AgentRegistry } from '../registry/agentRegistry.js';
import type { PolicyNotices } from '../registry/policyNotices.js';
import { BoundedCache } from '../util/boundedCache.js';
import { startAuthCallout, type AuthCalloutResponder, type RefusedLogin } from './authCallout.js';
import { RevocationKicks } from './revocationKicks.js';

/** Coordinators whose responder has been attached (see {@link ownAgentAccess}). */
const answering = new WeakSet<object>();

/**
 * How a coordinator's own agents (demo workers, A2A bridges) log in: through the join door and then
 * with their own keys when the fabric grants agent users (a spawned server, or the auth callout),
 * else as the legacy shared specialist (an external NATS without callout knows only the roles).
 */
export function ownAgentAccess(c: {
  grants: unknown;
  joinCredential: RoleCredential;
  credentials: NatsCredentials;
}): { join: RoleCredential } | { credential: RoleCredential } {
  return c.grants !== undefined || answering.has(c)
    ? { join: c.joinCredential }
    : { credential: c.credentials.specialist };
}

/** The issuer key when the callout is on for this coordinator, else undefined. */
export async function calloutIssuerFor(
  config: AmfConfig,
  env: NodeJS.ProcessEnv,
): Promise<CalloutIssuer | undefined> {
  // A spawned server (Debian's 2.9 has no callout) gets its agent users by config reload instead.
  if (!config.nats.url || config.nats.authCallout === false) return undefined;
  const file = calloutKeyFile(config.dataDir, env);
  return config.nats.authCallout === true ? loadOrCreateCalloutIssuer(file) : readCalloutIssuer(file);
}

/**
 * The callout for this coordinator when it is on (calloutIssuerFor), with the server's system user
 * when the data dir or the environment gives one; undefined when the callout is off.
 */
export async function startCalloutFor(opts: {
  nc: NatsConnection;
  natsUrl: string;
  config: AmfConfig;
  env: NodeJS.ProcessEnv;
  credentials: NatsCredentials;
  join: RoleCredential;
  log: LogFn;
}): Promise<WiredCallout | undefined> {
  const issuer = await calloutIssuerFor(opts.config, opts.env);
  if (!issuer) return undefined;
  const system = await readSystemCredentialIfPresent(opts.config.dataDir, opts.env);
  return wireAuthCallout({ ...opts, issuer, system });
}

/** What the coordinator hands over once it is built. */
export interface CalloutParts {
  registry: AgentRegistry;
  notices: PolicyNotices;
}

/** A responder started before the coordinator exists, and `attach` to give it the registry. */
export interface WiredCallout {
  responder: AuthCalloutResponder;
  attach(parts: CalloutParts): void;
}

/**
 * Starts answering at once (the coordinator's own watcher and connector logins may already need
 * it); until `attach`, no agent key is live and refusals are only logged.
 */
export function wireAuthCallout(opts: {
  nc: NatsConnection;
  natsUrl: string;
  issuer: CalloutIssuer;
  config: AmfConfig;
  credentials: NatsCredentials;
  join: RoleCredential;
  /** The server's system-account user (`system.json`), when it gave the mesh one. */
  system: RoleCredential | undefined;
  log: LogFn;
}): WiredCallout {
  let parts: CalloutParts | undefined;
  const recent = new BoundedCache<true>(10_000, 10_000);
  const onRefused = (r: RefusedLogin): void => {
    const key = `${r.reason}|${r.claimed}`;
    if (recent.get(key) !== undefined) return;
    recent.set(key, true);
    const fields = { reason: r.reason, claimed: r.claimed, host: r.host, server: r.server };
    // An honest agent tries its key before it is admitted, and again after a revocation: no alarm.
    if (r.reason === 'key_not_admitted' || !parts) {
      opts.log('info', 'NATS login refused by the auth callout', fields);
      return;
    }
    const bound = parts.registry.list().find((a) => a.record.nkey === r.claimed)?.record.agent_id;
    const who = r.claimed.startsWith('U') ? `key ${r.claimed}` : r.claimed;
    opts.log('warn', 'NATS login refused by the auth callout', fields);
    parts.notices.warn({
      reason: 'permission_violation',
      message: `NATS login as ${who} refused: ${r.reason.replace(/_/g, ' ')}`,
      agent_id: who,
      details: {
        kind: 'connect',
        refusal: r.reason,
        ...(bound !== undefined ? { claimed_agent: bound } : {}),
        ...(r.host !== undefined ? { client_host: r.host } : {}),
        server: r.server,
      },
    });
  };
  const responder = startAuthCallout({
    nc: opts.nc,
    issuer: opts.issuer,
    credentials: opts.credentials,
    join: opts.join,
    ttlSeconds: opts.config.nats.authCalloutTtlSeconds,
    liveAgent: (nkey) => {
      const granted = parts?.registry.grantedKeys().get(nkey);
      // An invited key not admitted yet has no agent id: its user is named by the key.
      return granted && { agentId: granted.agentId ?? nkey, tags: granted.tags };
    },
    onRefused,
    log: opts.log,
  });
  opts.log('info', 'NATS auth callout answering', { issuer: opts.issuer.publicKey });
  return {
    responder,
    attach: (p) => {
      parts = p;
      answering.add(p);
      if (opts.system) void kickRevokedAgents(opts, opts.system, p.registry);
      else
        opts.log(
          'info',
          'no NATS system-account user (system.json): a revoked agent is cut when its JWT expires',
          {
            ttl_seconds: opts.config.nats.authCalloutTtlSeconds,
          },
        );
    },
  };
}

/** Logs in as the system user and kicks revoked agents until the coordinator's connection closes. */
async function kickRevokedAgents(
  opts: { nc: NatsConnection; natsUrl: string; log: LogFn },
  system: RoleCredential,
  registry: AgentRegistry,
): Promise<void> {
  let sys: NatsConnection;
  try {
    sys = await connectAs(opts.natsUrl, system, 'amf-coordinator-system', RECONNECT_FOREVER);
  } catch (err) {
    opts.log('warn', 'NATS system-account login failed: revoked agents are cut only when their JWT expires', {
      err: err instanceof Error ? err.message : String(err),
    });
    return;
  }
  const kicks = new RevocationKicks({
    sys,
    // Live agents' bound keys and enrolled keys (registry.grantedKeys), each with its user's name.
    liveKeys: () => new Map([...registry.grantedKeys()].map(([key, g]) => [key, g.agentId ?? key])),
    onRegistryChange: (listener) => registry.onChange(listener),
    log: opts.log,
  });
  kicks.start();
  opts.log('info', 'NATS system account: revoked agents’ connections are closed at once');
  void opts.nc.closed().then(async () => {
    kicks.close();
    await sys.close().catch(() => undefined);
  });
}
