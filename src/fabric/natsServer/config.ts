/**
 * nats-server configuration for an AMF mesh: one user per role with the subject ACLs of
 * notes/amf.md §8. These ACLs are the security boundary (the `amfagentrole` event attribute is only
 * advisory), so the rules live here as plain data, rendered verbatim and shown in docs and tests.
 */
import {
  NATS_ROLES,
  ROLE_USERS,
  type NatsCredentials,
  type NatsRole,
  type RoleCredential,
} from '../credentials.js';
import { agentPermissions, JOIN_PERMISSIONS, JOIN_USER, type MeshUsers } from '../agentUsers.js';
import { NONCE_ANCHOR_NKEY } from '../nonceAnchor.js';
import { AmfError } from '../../errors.js';

/** Subjects a user may (allow) and may never (deny) use for one operation; deny wins. */
export interface SubjectPermission {
  readonly allow: readonly string[];
  readonly deny: readonly string[];
}

/** Everything nats-server enforces for one role. */
export interface RolePermissions {
  readonly publish: SubjectPermission;
  readonly subscribe: SubjectPermission;
  /**
   * Lets a service answer a request on whatever reply subject the requester chose, once per
   * request, without a blanket publish grant on that subject.
   */
  readonly allowResponses?: { readonly max: number };
}

/**
 * Each role's replies arrive under its own inbox prefix. A shared `_INBOX.>` grant would let any
 * specialist read every reply the coordinator receives, including JetStream consumer deliveries and
 * KV reads, which would bypass the `amf.internal.>` deny; {@link connectAs} sets this prefix.
 */
export function inboxPrefixFor(user: string): string {
  return `_INBOX.${user}`;
}

/** Subjects that reach JetStream, KV and object store: only the coordinator writes state. */
const STATE_SUBJECTS = ['$JS.>', '$KV.>', '$O.>'] as const;

/**
 * Everything of JetStream, KV and object store a worker may not touch, whether it connects as the
 * legacy specialist or as its own agent user (see their allow lists).
 */
export const WORKER_DENIED_STATE = [
  '$KV.>',
  '$O.>',
  '$JS.API.STREAM.>',
  '$JS.API.CONSUMER.CREATE.>',
  '$JS.API.CONSUMER.DURABLE.>',
  '$JS.API.CONSUMER.DELETE.>',
  '$JS.API.CONSUMER.LIST.>',
  '$JS.API.CONSUMER.NAMES.>',
  '$JS.API.DIRECT.>',
  '$JS.API.ACCOUNT.>',
  '$JS.API.META.>',
  '$JS.API.SERVER.>',
] as const;

function inbox(role: NatsRole): string {
  return `${inboxPrefixFor(ROLE_USERS[role])}.>`;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** The ACL table the server config is rendered from (frozen: it is the security policy). */
export const ROLE_PERMISSIONS: Readonly<Record<NatsRole, RolePermissions>> = deepFreeze({
  coordinator: {
    publish: { allow: ['>'], deny: [] },
    subscribe: { allow: ['>'], deny: [] },
  },
  specialist: {
    publish: {
      allow: [
        'amf.task.claim',
        'amf.task.progress',
        'amf.task.blocked',
        'amf.task.delegate',
        'amf.result.>',
        'amf.artifact.>',
        'amf.evidence.>',
        'amf.discovery.agent.heartbeat',
        'amf.internal.reply.>',
        // Final results of mesh tasks sent straight to their coordinator (request/reply).
        'amf.internal.final.>',
        // Final results of mesh tasks, stored by JetStream (AMF_RESULTS); the ack comes to the inbox.
        'amf.internal.result.>',
        // Pulling, acknowledging and extending work-queue messages (AMF_WORK); never creating,
        // deleting or reading anything else of JetStream.
        '$JS.API.CONSUMER.INFO.AMF_WORK.*',
        '$JS.API.CONSUMER.MSG.NEXT.AMF_WORK.*',
        '$JS.ACK.AMF_WORK.>',
        '_INBOX.>',
      ],
      // Deny wins over allow in nats-server, so JetStream is denied piecewise around the work queue.
      deny: ['amf.task.announce', 'amf.task.announce.>', ...WORKER_DENIED_STATE],
    },
    subscribe: {
      allow: [
        'amf.task.announce.>',
        'amf.task.>',
        'amf.result.>',
        'amf.discovery.>',
        'amf.policy.>',
        // Every agent's own subjects (follow-ups): the shared legacy user stands for every agent
        // that logs in with it, and reads all of `amf.task.>` anyway.
        'amf.agent.>',
        inbox('specialist'),
      ],
      deny: ['amf.internal.>', ...STATE_SUBJECTS],
    },
    allowResponses: { max: 1 },
  },
  watcher: {
    publish: { allow: ['amf.internal.classified', '_INBOX.>'], deny: [...STATE_SUBJECTS] },
    subscribe: { allow: ['amf.internal.raw', inbox('watcher')], deny: [...STATE_SUBJECTS] },
  },
  connector: {
    publish: { allow: ['amf.internal.raw'], deny: [...STATE_SUBJECTS] },
    subscribe: { allow: [inbox('connector')], deny: [...STATE_SUBJECTS] },
  },
});

/** Options of {@link renderNatsConfig}. */
export interface NatsConfigOptions {
  host: string;
  /** -1 asks nats-server for a random free port. */
  port: number;
  /** nats-server's `store_dir`; JetStream keeps its files in `<storeDir>/jetstream`. */
  storeDir: string;
  credentials: NatsCredentials;
  maxPayloadBytes?: number;
  serverName?: string;
  /** Makes this server one node of a NATS cluster (see cluster.ts); requires `serverName`. */
  cluster?: ClusterRouting;
  /** The join user and the admitted agents' nkey users (agentUsers.ts). */
  users?: MeshUsers;
  /**
   * Whether the legacy shared `specialist` user is configured (default true: an external server
   * or a cluster node serves agents that connect with it). A coordinator that spawns its server
   * with legacy mode off leaves it out: its agents each have their own user, and a user nobody
   * needs is one password less to steal.
   */
  specialistUser?: boolean;
  /**
   * NATS auth callout (nats-server ≥ 2.10): every login but the static role users' is decided by the
   * coordinators (coordinator/authCallout.ts), whose issuer key's public half is `issuer`; with
   * `xkey` (the mesh's curve key, `X…`) requests and answers are encrypted.
   */
  authCallout?: { issuer: string; xkey?: string };
  /**
   * A user of the server's system account (`$SYS`) for the coordinators: with it they close the
   * connections of agents that are no longer admitted (revocationKicks.ts). It bypasses the callout.
   */
  systemUser?: RoleCredential;
}

/** The `cluster {}` block of one node: where it listens for routes and which peers it dials. */
export interface ClusterRouting {
  name: string;
  host: string;
  port: number;
  /** Route URLs of the other nodes (`nats-route://host:port`), without credentials. */
  routes: readonly string[];
  /** Every node accepts and presents this user on routes (route connections bypass the role ACLs). */
  routeUser: string;
  routePassword: string;
}

/** NATS default and AMF's cap on one event: large artifacts travel by reference, not inline. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

/**
 * Renders the nats-server config text. Every string is quoted (passwords and paths are untrusted
 * text as far as the config grammar is concerned), and the users and ACLs come only from
 * {@link ROLE_PERMISSIONS}, so what the docs show is exactly what the server enforces.
 */
export function renderNatsConfig(opts: NatsConfigOptions): string {
  const maxPayload = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  if (!Number.isInteger(opts.port) || opts.port < -1 || opts.port > 65535) {
    throw new AmfError('CONFIG_INVALID', `invalid NATS port ${opts.port}: expected -1 (random) or 0..65535`);
  }
  if (!Number.isInteger(maxPayload) || maxPayload < 1 || maxPayload > 64 * 1024 * 1024) {
    throw new AmfError('CONFIG_INVALID', `invalid max_payload ${maxPayload}: expected 1..67108864 bytes`);
  }
  const lines = [
    '# Generated by AMF: edits are overwritten on every start.',
    `host: ${quote(opts.host)}`,
    `port: ${opts.port}`,
    `max_payload: ${maxPayload}`,
  ];
  if (opts.serverName !== undefined) lines.push(`server_name: ${quote(opts.serverName)}`);
  lines.push('jetstream {', `  store_dir: ${quote(opts.storeDir)}`, '}');
  if (opts.cluster) lines.push(...renderCluster(opts.cluster, opts.serverName));
  lines.push('authorization {', '  users: [');
  const staticUsers: string[] = [];
  for (const role of NATS_ROLES) {
    if (role === 'specialist' && opts.specialistUser === false) continue;
    lines.push(`    ${renderUser(role, opts.credentials)}`);
    staticUsers.push(opts.credentials[role].user);
  }
  // With a callout, one nkey user makes the server send every client a nonce to sign (see
  // NONCE_ANCHOR_NKEY); no one holds its seed, and it may do nothing.
  if (opts.authCallout)
    lines.push(`    { nkey: ${quote(NONCE_ANCHOR_NKEY)}, ${renderPermissions(NOTHING_ALLOWED)} }`);
  const join = opts.users?.join;
  if (join) {
    if (join.user !== JOIN_USER)
      throw new AmfError('CONFIG_INVALID', `the join user must be named ${JOIN_USER}`);
    lines.push(
      `    { user: ${quote(join.user)}, password: ${quote(join.password)}, ${renderPermissions(JOIN_PERMISSIONS)} }`,
    );
  }
  for (const agent of opts.users?.agents ?? []) {
    if (!/^U[A-Z2-7]{55}$/.test(agent.nkey))
      throw new AmfError('CONFIG_INVALID', `invalid agent nkey ${JSON.stringify(agent.nkey)}`);
    lines.push(`    { nkey: ${quote(agent.nkey)}, ${renderPermissions(agentPermissions(agent))} }`);
  }
  lines.push('  ]');
  if (opts.systemUser) staticUsers.push(opts.systemUser.user);
  if (opts.authCallout) lines.push(...renderAuthCallout(opts.authCallout, staticUsers));
  lines.push('}');
  // The server's own system account, named as nats-server names it by default, so a cluster that
  // gains this user keeps its JetStream meta group where it was.
  if (opts.systemUser)
    lines.push(
      'accounts {',
      `  "$SYS": { users: [ { user: ${quote(opts.systemUser.user)}, password: ${quote(opts.systemUser.password)} } ] }`,
      '}',
    );
  lines.push('');
  return lines.join('\n');
}

const NOTHING_ALLOWED: RolePermissions = {
  publish: { allow: [], deny: ['>'] },
  subscribe: { allow: [], deny: ['>'] },
};

/**
 * The role users bypass the callout (`auth_users`): the coordinators must log in to answer it. With
 * `xkey` the server seals every request to that curve key (calloutIssuer.ts).
 */
function renderAuthCallout(
  { issuer, xkey }: { issuer: string; xkey?: string },
  staticUsers: readonly string[],
): string[] {
  if (!/^A[A-Z2-7]{55}$/.test(issuer))
    throw new AmfError('CONFIG_INVALID', `invalid auth callout issuer ${JSON.stringify(issuer)}`);
  if (xkey !== undefined && !/^X[A-Z2-7]{55}$/.test(xkey))
    throw new AmfError('CONFIG_INVALID', `invalid auth callout xkey ${JSON.stringify(xkey)}`);
  return [
    '  auth_callout {',
    `    issuer: ${quote(issuer)}`,
    `    auth_users: [${staticUsers.map(quote).join(', ')}]`,
    ...(xkey !== undefined ? [`    xkey: ${quote(xkey)}`] : []),
    '  }',
  ];
}

function renderCluster(c: ClusterRouting, serverName: string | undefined): string[] {
  // Clustered JetStream tells nodes apart by server_name; without one, RAFT groups cannot form.
  if (serverName === undefined)
    throw new AmfError('CONFIG_INVALID', 'a clustered nats-server needs a serverName');
  if (!Number.isInteger(c.port) || c.port < 1 || c.port > 65535) {
    throw new AmfError('CONFIG_INVALID', `invalid NATS route port ${c.port}: expected 1..65535`);
  }
  const routes = c.routes.map((r) => {
    const url = new URL(r);
    if (url.protocol !== 'nats-route:' || url.username !== '' || url.password !== '') {
      throw new AmfError(
        'CONFIG_INVALID',
        `invalid route ${r}: expected nats-route://host:port without credentials`,
      );
    }
    // Credentials go into the URL here, from one place, so they are never typed into a route list.
    url.username = encodeURIComponent(c.routeUser);
    url.password = encodeURIComponent(c.routePassword);
    return quote(url.toString().replace(/\/$/, ''));
  });
  return [
    'cluster {',
    `  name: ${quote(c.name)}`,
    `  host: ${quote(c.host)}`,
    `  port: ${c.port}`,
    `  authorization { user: ${quote(c.routeUser)}, password: ${quote(c.routePassword)} }`,
    `  routes: [${routes.join(', ')}]`,
    '}',
  ];
}

function renderUser(role: NatsRole, credentials: NatsCredentials): string {
  const cred = credentials[role];
  return `{ user: ${quote(cred.user)}, password: ${quote(cred.password)}, ${renderPermissions(ROLE_PERMISSIONS[role])} }`;
}

function renderPermissions(perms: RolePermissions): string {
  const parts = [
    `publish: ${renderSubjects(perms.publish)}`,
    `subscribe: ${renderSubjects(perms.subscribe)}`,
  ];
  if (perms.allowResponses) parts.push(`allow_responses: { max: ${perms.allowResponses.max} }`);
  return `permissions: { ${parts.join(', ')} }`;
}

function renderSubjects(p: SubjectPermission): string {
  const list = (xs: readonly string[]): string => `[${xs.map(quote).join(', ')}]`;
  // An empty allow list is left out: the deny list alone then says what is refused.
  if (p.allow.length === 0) return `{ deny: ${list(p.deny)} }`;
  return p.deny.length > 0
    ? `{ allow: ${list(p.allow)}, deny: ${list(p.deny)} }`
    : `{ allow: ${list(p.allow)} }`;
}

/**
 * Double-quotes a value for the nats-server config grammar. Only `\` and `"` need escaping inside
 * double quotes (and `$` is not expanded there); control characters have no reliable escape, so
 * they are refused rather than risk a config that means something else.
 */
function quote(value: string): string {
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    throw new AmfError(
      'CONFIG_INVALID',
      `cannot write ${JSON.stringify(value)} into the NATS config: control characters are not allowed`,
    );
  }
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}
