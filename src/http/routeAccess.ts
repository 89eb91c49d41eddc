/**
 * Who may call which route of the coordinator's HTTP edge: one table, the only place the edge
 * (apps/coordinatorApp.ts) decides it, and the one docs/security.md shows (a test keeps the two equal).
 *
 * - `public`: never a key. The console's page and files, `/health` and the agent cards hold no mesh
 *   data, and a client must read a card before it can know how to authenticate.
 * - `client`: the client protocol endpoints. Open to callers whose socket comes from loopback, so
 *   every OpenAI, MCP and A2A client on this machine stays zero-config; from any other address they
 *   need the operator key, or under SPIFFE a JWT-SVID for the coordinator.
 * - `operator`: everything else, any unknown path included, needs the operator key even from
 *   loopback: these routes act on the mesh or observe it (every event, task and agent).
 *
 * A credential that is presented is checked on every non-public route: a wrong key is a 401, never a
 * silent fall-back to anonymous (a caller who meant to be the operator learns it is not). The one
 * exception is `/v1/*` on loopback, where a bearer that is not the operator key is ignored: OpenAI
 * SDKs cannot send none (`api_key="unused"` is how every local server is reached).
 *
 * The peer address is the socket's, never `X-Forwarded-For`: a reverse proxy on this machine makes
 * every caller local, so such a proxy must carry the key itself.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { AmfError } from '../errors.js';
import { checkBearer } from '../identity/bearerAuth.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import { isIpAddress, isLoopbackHost } from '../net/hostRules.js';

/** The three rules of the table (see the module comment). */
export type AccessRule = 'public' | 'client' | 'operator';

/** One row of the table. */
export interface RouteAccess {
  /** `/path` exactly, `/prefix/*` for every path under it, or `*` for any path not listed. */
  readonly path: string;
  /** Only this method matches the row; others fall through (to the operator rule). */
  readonly method?: string;
  readonly rule: AccessRule;
  /** On loopback, a bearer that is not the operator key is ignored rather than refused. */
  readonly placeholderBearer?: true;
  /** Why the row has its rule (shown in docs/security.md). */
  readonly why: string;
}

/** The table, first match wins; the last row catches every other path. */
export const ROUTE_ACCESS: readonly RouteAccess[] = [
  { path: '/', rule: 'public', why: 'the console page; it holds no mesh data' },
  { path: '/console/*', rule: 'public', why: "the console's scripts and styles" },
  { path: '/favicon.ico', rule: 'public', why: 'browsers ask for it' },
  { path: '/health', rule: 'public', why: 'liveness for scripts and load balancers: status and counts' },
  {
    path: '/.well-known/agent-card.json',
    rule: 'public',
    why: 'A2A discovery: read before a client can know how to authenticate',
  },
  { path: '/.well-known/agent.json', rule: 'public', why: 'A2A 0.3 and AMP discovery' },
  {
    path: '/join',
    method: 'POST',
    rule: 'public',
    why: 'redeems an invite from another machine: the one-time invite in the body is the credential',
  },
  {
    path: '/v1/*',
    rule: 'client',
    placeholderBearer: true,
    why: 'OpenAI-compatible API; on loopback a bearer other than the operator key is ignored (OpenAI SDKs always send one)',
  },
  { path: '/a2a', rule: 'client', why: 'A2A JSON-RPC' },
  { path: '/a2a/*', rule: 'client', why: 'A2A HTTP+JSON' },
  {
    path: '/mcp',
    rule: 'client',
    why: 'aggregate MCP endpoint; every tool call is policy-checked and audited',
  },
  { path: '/mcp/call', rule: 'client', why: 'Fabric protocol' },
  { path: '/api/amp/*', rule: 'client', why: 'AMP' },
  {
    path: '/publish',
    method: 'POST',
    rule: 'client',
    why: 'without the key only evidence and artifacts; announce and cancel need the operator key',
  },
  { path: '/events', rule: 'operator', why: 'every event of the mesh, live (`?api_key=` for EventSource)' },
  { path: '/events/history', rule: 'operator', why: 'the stored event history' },
  { path: '/tasks', rule: 'operator', why: 'every task and its text' },
  { path: '/tasks/*', rule: 'operator', why: 'one task, its parts and answer' },
  { path: '/agents', rule: 'operator', why: 'the registry' },
  { path: '/agents/*', rule: 'operator', why: 'one agent; DELETE forgets it' },
  { path: '/admissions', rule: 'operator', why: 'admission decisions and their reasons' },
  { path: '/tools', rule: 'operator', why: 'the federated tool catalog with its policy view' },
  { path: '/audit', rule: 'operator', why: 'MCP call audit records' },
  { path: '/metrics', rule: 'operator', why: 'Prometheus metrics' },
  { path: '/invites', method: 'POST', rule: 'operator', why: 'mints a one-time invite (`amf invite`)' },
  { path: '*', rule: 'operator', why: 'any other path: closed unless listed above' },
];

function matches(row: RouteAccess, method: string, pathname: string): boolean {
  if (row.method !== undefined && row.method !== method) return false;
  if (row.path === '*') return true;
  if (row.path.endsWith('/*')) return pathname.startsWith(row.path.slice(0, -1));
  return pathname === row.path;
}

/** The row that decides a request (the catch-all when no other matches). */
export function routeAccess(method: string, pathname: string): RouteAccess {
  return ROUTE_ACCESS.find((row) => matches(row, method, pathname)) ?? ROUTE_ACCESS.at(-1)!;
}

/** How a row is written in the docs: `POST /publish`, `/tasks/*`, `*`. */
export function routeLabelOf(row: RouteAccess): string {
  return row.method ? `${row.method} ${row.path}` : row.path;
}

/** True when a socket's peer address is loopback: 127.0.0.0/8, ::1, ::ffff:127.x. */
export function isLoopbackPeer(address: string | undefined): boolean {
  return address !== undefined && isIpAddress(address) && isLoopbackHost(address);
}

/** Each connection's loopback verdict: its peer address does not change, so it is judged once. */
const loopbackSockets = new WeakMap<object, boolean>();

/** {@link isLoopbackPeer} of a request's connection, remembered for the connection's next requests. */
function isLoopbackConnection(socket: IncomingMessage['socket']): boolean {
  const known = loopbackSockets.get(socket);
  if (known !== undefined) return known;
  const address = socket.remoteAddress;
  const local = isLoopbackPeer(address);
  if (address !== undefined) loopbackSockets.set(socket, local);
  return local;
}

/** Who a request is, as the edge authenticated it. */
export type EdgeCaller =
  | { kind: 'anonymous' }
  | { kind: 'operator' }
  /** A workload with a valid JWT-SVID for the coordinator (SPIFFE mode, client routes only). */
  | { kind: 'svid'; spiffeId: string };

/** The edge's verdict on one request. */
export type EdgeDecision =
  { ok: true; caller: EdgeCaller } | { ok: false; error: AmfError; wwwAuthenticate: string };

/** What a request presented as its credential. */
type Presented =
  | { kind: 'none' }
  | { kind: 'bearer'; token: string }
  | { kind: 'query'; token: string }
  /** An Authorization header that is not a bearer, or `?api_key=` where it is not taken. */
  | { kind: 'unusable'; why: string };

const BEARER = /^bearer\s+(\S+)\s*$/i;

function presentedBy(req: IncomingMessage, url: URL): Presented {
  const header = req.headers.authorization;
  if (typeof header === 'string' && header !== '') {
    const match = BEARER.exec(header);
    return match ? { kind: 'bearer', token: match[1]! } : { kind: 'unusable', why: 'not a Bearer header' };
  }
  const query = url.searchParams.get('api_key');
  if (query === null) return { kind: 'none' };
  // EventSource cannot set headers; anywhere else a key in the URL only ends up in logs.
  if (url.pathname === '/events') return { kind: 'query', token: query };
  return { kind: 'unusable', why: '?api_key= is taken only on /events (EventSource)' };
}

const HOW_TO_GET_THE_KEY =
  'send Authorization: Bearer <key>. The key is AMF_API_KEY when the coordinator was started with one, ' +
  'else the one generated into <data-dir>/operator.key (default ~/.amf/operator.key); ' +
  'the amf CLI of the same user reads it by itself, and the console URL `amf up` prints carries it';

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Options of {@link EdgeAuth}. */
export interface EdgeAuthOptions {
  /** The operator key: the configured one, or the one generated into the data dir. */
  operatorKey: string;
  /** Under SPIFFE, client routes beyond loopback also take a JWT-SVID whose audience is the coordinator. */
  identity?: IdentityProvider;
}

/** Applies the table to requests. */
export class EdgeAuth {
  private readonly expected: Buffer;
  private readonly identity: IdentityProvider | undefined;

  constructor(options: EdgeAuthOptions) {
    if (options.operatorKey === '')
      throw new AmfError('CONFIG_INVALID', 'the operator key must not be empty');
    this.expected = sha256(options.operatorKey);
    this.identity = options.identity?.mode === 'spiffe' ? options.identity : undefined;
  }

  /** Constant-time: both sides are hashed to one length first, so the comparison leaks no prefix. */
  private isKey(token: string): boolean {
    return timingSafeEqual(sha256(token), this.expected);
  }

  /**
   * True when the request presented the operator key. Routes that grant the key holder more (the
   * operator's `/publish`) ask again, so a route made public later cannot hand out that authority.
   */
  isOperator(req: IncomingMessage, url: URL): boolean {
    const presented = presentedBy(req, url);
    return (presented.kind === 'bearer' || presented.kind === 'query') && this.isKey(presented.token);
  }

  /** Decides whether `req` may reach the router, and as whom. */
  async decide(req: IncomingMessage, url: URL): Promise<EdgeDecision> {
    const method = req.method ?? 'GET';
    const row = routeAccess(method, url.pathname);
    if (row.rule === 'public') return { ok: true, caller: { kind: 'anonymous' } };
    const presented = presentedBy(req, url);
    if ((presented.kind === 'bearer' || presented.kind === 'query') && this.isKey(presented.token))
      return { ok: true, caller: { kind: 'operator' } };
    const local = isLoopbackConnection(req.socket);
    const what = `${method} ${url.pathname}`;
    if (row.rule === 'client') {
      if (local && (presented.kind === 'none' || (row.placeholderBearer && presented.kind === 'bearer')))
        return { ok: true, caller: { kind: 'anonymous' } };
      if (this.identity && presented.kind === 'bearer') {
        const check = await checkBearer(req.headers.authorization, { identity: this.identity });
        if (check.ok) return { ok: true, caller: { kind: 'svid', spiffeId: check.caller } };
        return refuse(
          `${what}: the bearer is neither the operator key nor a valid JWT-SVID for this coordinator (${check.message})`,
          'wrong_key',
          check.wwwAuthenticate,
        );
      }
    }
    if (presented.kind === 'none') {
      const where =
        row.rule === 'client'
          ? `from beyond loopback (${req.socket.remoteAddress ?? 'unknown address'})${this.identity ? ', or a JWT-SVID for this coordinator' : ''}`
          : 'even from loopback';
      return refuse(`${what} needs the operator key ${where}: ${HOW_TO_GET_THE_KEY}`, 'missing_key');
    }
    if (presented.kind === 'unusable')
      return refuse(
        `${what}: the credential cannot be used (${presented.why}): ${HOW_TO_GET_THE_KEY}`,
        'unusable_key',
      );
    return refuse(`${what}: wrong operator key: ${HOW_TO_GET_THE_KEY}`, 'wrong_key');
  }
}

function refuse(
  message: string,
  reason: 'missing_key' | 'wrong_key' | 'unusable_key',
  wwwAuthenticate?: string,
): EdgeDecision {
  return {
    ok: false,
    error: new AmfError('UNAUTHORIZED', message, { reason }),
    wwwAuthenticate:
      wwwAuthenticate ?? `Bearer realm="amf"${reason === 'missing_key' ? '' : ', error="invalid_token"'}`,
  };
}
