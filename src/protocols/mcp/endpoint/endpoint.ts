/**
 * One MCP Streamable HTTP endpoint (`/mcp`) on node:http, shared by workers and the coordinator.
 * The official SDK transport does the protocol work (JSON-RPC framing, SSE, `MCP-Protocol-Version`
 * checks, 404 for ended sessions); this module adds what the SDK leaves to the host: one SDK
 * `Server` per session (the SDK binds a server to one transport), a session table, `Origin`
 * validation, a bounded body, broadcast of notifications to every open session, and SSE
 * resumability (SEP-1699: event ids, priming events with `retry`, `Last-Event-ID`; see
 * sessionEventStore.ts). Given a protocol-neutral tool surface, it also serves the stateless
 * revision 2026-07-28 (stateless.ts).
 *
 * Sessions cost memory (an SDK server and transport each) and `initialize` needs no credential, so
 * the table is bounded per client and in total, and a session nobody uses expires. On one machine
 * every client has the same address and ordinary clients never end their sessions (the official
 * SDK's `Client.close()` sends no DELETE), so a client at its share is never refused for sessions
 * it no longer uses: its least recently used idle session (no request in flight, no stream open)
 * is closed to make room, sessions that never made a request after `initialize` first. A client is
 * refused only when every session it holds is busy. One client's flood thus closes only its own
 * idle sessions, never another client's, nor a session of its own that is in use.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import type { AmfConfig } from '../../../config/config.js';
import { AmfError } from '../../../errors.js';
import { readBody } from '../../../http/httpKit.js';
import {
  httpStatusFor,
  JSONRPC_PARSE_ERROR,
  JSONRPC_SERVER_ERROR,
  jsonRpcErrorBody,
} from '../../../http/wireErrors.js';
import { isLoopbackHost } from '../../../net/hostRules.js';
import { StatelessMcp, type McpToolSurface } from './stateless.js';
import { answerFast, asFastRequest, type FastAnswer, type FastRequestHandler } from './sessionFastPath.js';
import { SessionEventStore, STANDALONE_STREAM_ID } from './sessionEventStore.js';

export type { McpToolSurface } from './stateless.js';

/** MCP revision AMF agents announce in `protocols_supported` (the SDK's latest). */
export const MCP_PROTOCOL = 'MCP/2025-11-25';

/** Options of an MCP endpoint. */
export interface McpEndpointOptions {
  /** Builds the SDK server of one new session; `caller` is the client's remote address. */
  createServer: (session: { caller: string }) => McpServer;
  /** Largest accepted request body (default 4 MiB: above the policy's 1 MiB argument limit). */
  maxBodyBytes?: number;
  /** Most sessions open at once, all clients together; a new one beyond it is refused (default 1000). */
  maxSessions?: number;
  /**
   * Most sessions one client may hold open (default 32). Its next `initialize` closes its least
   * recently used idle session; it is refused only when all of them are busy.
   */
  maxSessionsPerClient?: number;
  /** A session without a request (and without an open stream) for this long is closed (default 10 min). */
  sessionIdleMs?: number;
  /**
   * Whom a request counts against (default: its remote address, IPv4-mapped IPv6 folded). The
   * coordinator's API key is shared by every holder, so the address is the finer key.
   */
  clientKey?: (req: IncomingMessage) => string;
  /** Extra allowed `Origin` values besides localhost ones (exact match, e.g. `https://ide.example`). */
  allowedOrigins?: string[];
  /** Sees every request before it is handled (e.g. to note the coordinator's fingerprint header). */
  onRequest?: (req: IncomingMessage) => void;
  /**
   * The endpoint's tools, protocol-neutral. With it, requests of the stateless revision 2026-07-28
   * are served by the v2 SDK (stateless.ts); without it, every request takes the session path.
   */
  tools?: McpToolSurface;
  /** Serves a plain request of a live session without the SDK transport (sessionFastPath.ts). */
  fastRequest?: FastRequestHandler;
  /** The `retry` (ms) a priming event tells clients to wait before they resume (default 1000). */
  sseRetryMs?: number;
}

/** The bounds of an endpoint's session table (config `mcp.*`, see McpEndpointOptions). */
export type McpSessionLimits = Pick<
  McpEndpointOptions,
  'maxSessions' | 'maxSessionsPerClient' | 'sessionIdleMs'
>;

/** The `/mcp` session bounds of `config` (the coordinator's and workers' alike). */
export function mcpSessionLimits(config: AmfConfig): McpSessionLimits {
  return {
    sessionIdleMs: config.mcp.sessionIdleSeconds * 1000,
    maxSessions: config.mcp.maxSessions,
    maxSessionsPerClient: config.mcp.maxSessionsPerClient,
  };
}

interface Session {
  id: string;
  server: McpServer;
  transport: StreamableHTTPServerTransport;
  client: string;
  /** Requests (and GET streams) of this session still open: a session in use is never idle. */
  open: number;
  /** Epoch ms when the session was opened or its last open request ended. */
  lastUsed: number;
  /** A request came after `initialize`: the session was put to use (a bare flood's never are). */
  used: boolean;
  /** The protocol revision negotiated at `initialize`. */
  protocolVersion: string;
  events: SessionEventStore;
}

/** The first MCP revision without sessions (dates compare as strings). */
const STATELESS_REVISION = '2026-07-28';

export const DEFAULT_MAX_SESSIONS = 1000;
export const DEFAULT_MAX_SESSIONS_PER_CLIENT = 32;
export const DEFAULT_SESSION_IDLE_MS = 10 * 60_000;
export const DEFAULT_SSE_RETRY_MS = 1000;

/** The first revision whose clients take priming events (SSE events with an id and empty data). */
const PRIMING_REVISION = '2025-11-25';

/** The remote address of a request, IPv4-mapped IPv6 folded (`::ffff:127.0.0.1` → `127.0.0.1`). */
export function remoteAddressKey(req: IncomingMessage): string {
  const addr = req.socket.remoteAddress ?? 'unknown';
  return addr.startsWith('::ffff:') ? addr.slice(7) : addr;
}

/**
 * `Origin` check (spec: servers MUST validate it, 403 when invalid; DNS-rebinding defence). Absent
 * Origin means a non-browser client and is allowed; browser pages are allowed only from a loopback
 * host (any port) or an explicitly configured origin.
 */
export function originAllowed(origin: string | undefined, extra: readonly string[] = []): boolean {
  if (origin === undefined || origin === '') return true;
  if (extra.includes(origin)) return true;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  return isLoopbackHost(url.hostname);
}

const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/** MCP's "session not found" (the SDKs' convention; not a JSON-RPC or AMF code). */
const MCP_SESSION_NOT_FOUND = -32001;

/** A JSON-RPC error with the HTTP status of its AMF code; `code` overrides the table's JSON-RPC code. */
function jsonRpcError(res: ServerResponse, err: AmfError, code?: number): void {
  const body = JSON.stringify(jsonRpcErrorBody(err, code === undefined ? {} : { code }));
  res.writeHead(httpStatusFor(err.code), {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

function initializeRequest(body: unknown): { params?: { protocolVersion?: unknown } } | undefined {
  const one = (m: unknown): m is { params?: { protocolVersion?: unknown } } =>
    typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'initialize';
  return Array.isArray(body) ? body.find(one) : one(body) ? body : undefined;
}

/** The revision an `initialize` asking for `requested` settles on (the SDK server's rule). */
function negotiatedVersion(requested: unknown): string {
  return typeof requested === 'string' && SUPPORTED_PROTOCOL_VERSIONS.includes(requested)
    ? requested
    : LATEST_PROTOCOL_VERSION;
}

/**
 * Sets the `MCP-Protocol-Version` the SDK transport reads (it reads the raw headers). The SDK
 * decides per request, from this header alone, whether a stream gets a priming event and may be
 * closed early for polling; a client that negotiated a revision that takes them can take them on
 * every request of its session, whatever older revision a request names.
 */
function setProtocolVersionHeader(req: IncomingMessage, version: string): void {
  req.headers['mcp-protocol-version'] = version;
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    if (req.rawHeaders[i]!.toLowerCase() === 'mcp-protocol-version') req.rawHeaders[i + 1] = version;
}

/** True when `headers` (as given to `writeHead`, or set before it) name an SSE body. */
function isEventStream(headers: unknown): boolean {
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) return false;
  for (const [name, value] of Object.entries(headers))
    if (name.toLowerCase() === 'content-type') return String(value).startsWith('text/event-stream');
  return false;
}

/**
 * An MCP endpoint: route POST, GET and DELETE of `/mcp` to `handle`. Session-based revisions always;
 * the stateless revision too when `tools` is given.
 */
/** How long close() lets calls in flight answer their stopping error before the sessions close. */
const STOP_ANSWER_WAIT_MS = 1_500;

/**
 * The JSON-RPC error a call still in flight gets when the endpoint stops, before its stream ends
 * (rather than a stream cut with no answer).
 */
export const STOPPING_ERROR = {
  code: JSONRPC_SERVER_ERROR,
  message: 'the server is stopping: the call ended before its result; call again once it is back',
  data: { reason: 'server_stopping' },
} as const;

/** A fast answer that failed: a JSON-RPC error, or a tool result marked isError. */
function failed(answer: FastAnswer): boolean {
  return 'error' in answer || (answer.result as { isError?: unknown } | null)?.isError === true;
}

export class McpEndpoint {
  private readonly sessions = new Map<string, Session>();
  /** Aborted when close() begins: request handlers race it and answer STOPPING_ERROR. */
  private readonly stopper = new AbortController();
  /** POST responses of sessions still being answered, so close() can wait for their answers. */
  private readonly answering = new Set<ServerResponse>();
  /** What calls in flight do when the endpoint stops (whenStopping). */
  private readonly stopListeners = new Set<() => void>();
  /** The open sessions of each client. */
  private readonly byClient = new Map<string, Set<Session>>();
  /** Initializations under way per client (counted against its share, so racing ones cannot overshoot). */
  private readonly reserved = new Map<string, number>();
  private starting = 0;
  private closed = false;
  private readonly stateless: StatelessMcp | undefined;
  private readonly idleMs: number;
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(private readonly options: McpEndpointOptions) {
    this.stateless = options.tools
      ? new StatelessMcp(options.tools, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES)
      : undefined;
    this.idleMs = options.sessionIdleMs ?? DEFAULT_SESSION_IDLE_MS;
    // One sweep for all sessions rather than a timer each; a quarter of the idle time keeps the
    // overshoot small. Unref'd: an idle MCP endpoint must not keep the process alive.
    this.sweepTimer = setInterval(() => this.expireIdle(), Math.min(60_000, Math.max(25, this.idleMs / 4)));
    this.sweepTimer.unref();
  }

  /** Aborted once the endpoint stops: a call in flight answers STOPPING_ERROR (see close()). */
  get stopping(): AbortSignal {
    return this.stopper.signal;
  }

  /**
   * Runs `stop` when the endpoint stops (at once if it has); returns what unregisters it. A call in
   * flight aborts its own controller with it, rather than through AbortSignal.any over the
   * endpoint-long `stopping` signal, which would keep a listener per call until the endpoint ends.
   */
  whenStopping(stop: () => void): () => void {
    if (this.stopper.signal.aborted) {
      stop();
      return () => undefined;
    }
    this.stopListeners.add(stop);
    return () => this.stopListeners.delete(stop);
  }

  /** Number of open sessions. */
  get sessionCount(): number {
    return this.sessions.size;
  }

  /** Number of open sessions of one client (as `clientKey` names it), initializations included. */
  sessionsOf(client: string): number {
    return (this.byClient.get(client)?.size ?? 0) + (this.reserved.get(client) ?? 0);
  }

  /** Runs `fn` on the SDK server of every open session (e.g. `sendToolListChanged`). */
  async broadcast(fn: (server: McpServer) => Promise<void>): Promise<void> {
    await Promise.allSettled([...this.sessions.values()].map((s) => fn(s.server)));
  }

  /** Tells 2026-07-28 clients listening for changes that the tool list changed. */
  notifyToolsChanged(): void {
    this.stateless?.toolsChanged();
  }

  /** Handles one HTTP request to the MCP endpoint. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.options.onRequest?.(req);
    const origin = typeof req.headers.origin === 'string' ? req.headers.origin : undefined;
    if (!originAllowed(origin, this.options.allowedOrigins)) {
      jsonRpcError(res, new AmfError('FORBIDDEN', `Forbidden: Origin ${origin} is not allowed`));
      return;
    }
    if (this.closed) {
      jsonRpcError(res, new AmfError('UNAVAILABLE', 'MCP endpoint is shutting down'));
      return;
    }
    let parsed: unknown;
    let raw: Buffer | undefined;
    if (req.method === 'POST') {
      raw = await readBody(req, this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
      try {
        parsed = JSON.parse(raw.toString('utf8'));
      } catch (err) {
        const e = new AmfError('INVALID_REQUEST', 'Parse error: the body is not JSON', undefined, {
          cause: err,
        });
        jsonRpcError(res, e, JSONRPC_PARSE_ERROR);
        return;
      }
    }
    // The SDK's own classification decides the era, so the two paths can never disagree. Except on
    // the hot path of a live session (the stateless revision has no sessions): a request naming one
    // of our sessions and no newer protocol revision belongs to it. Classifying builds a web Request
    // per call, which was a tenth of the coordinator's CPU per federated tools/call (issue 14).
    if (
      this.stateless &&
      !this.isLiveSessionRequest(req) &&
      !(await this.stateless.isLegacy(req, raw, parsed))
    ) {
      await this.stateless.handle(req, res, raw);
      return;
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const session = this.sessions.get(sessionId);
      // Unknown or ended session: 404 tells the client to initialize again (spec, Session Management).
      if (!session) {
        jsonRpcError(res, new AmfError('NOT_FOUND', 'Session not found'), MCP_SESSION_NOT_FOUND);
        return;
      }
      session.open++;
      session.used = true;
      // 'close' fires once the response is done or the client went away, also for a GET stream.
      res.once('close', () => {
        session.open--;
        session.lastUsed = Date.now();
      });
      if (req.method === 'POST') {
        this.answering.add(res);
        res.once('close', () => this.answering.delete(res));
      }
      this.primeStreams(req, res, session);
      const fast = this.options.fastRequest && req.method === 'POST' ? asFastRequest(req, parsed) : undefined;
      if (fast) {
        const gone = new AbortController();
        res.once('close', () => gone.abort());
        const unlisten = this.whenStopping(() => gone.abort());
        try {
          const pending = this.options.fastRequest!({ server: session.server, sessionId }, fast, gone.signal);
          if (pending) {
            const answer = pending.then((a) =>
              this.stopper.signal.aborted && failed(a) ? { error: STOPPING_ERROR } : a,
            );
            await answerFast(res, sessionId, fast, answer);
            return;
          }
        } finally {
          unlisten();
        }
      }
      await session.transport.handleRequest(req, res, parsed);
      return;
    }
    const initialize = req.method === 'POST' ? initializeRequest(parsed) : undefined;
    if (!initialize) {
      // -32000 rather than -32600: the request is valid JSON-RPC, only the session header is missing.
      const e = new AmfError('INVALID_REQUEST', 'Bad Request: Mcp-Session-Id header is required');
      jsonRpcError(res, e, JSONRPC_SERVER_ERROR);
      return;
    }
    const client = (this.options.clientKey ?? remoteAddressKey)(req);
    const refusal = this.admitSession(client);
    if (refusal) {
      jsonRpcError(res, refusal, JSONRPC_SERVER_ERROR);
      return;
    }
    this.starting++;
    this.reserved.set(client, (this.reserved.get(client) ?? 0) + 1);
    try {
      await this.startSession(
        req,
        res,
        parsed,
        client,
        negotiatedVersion(initialize.params?.protocolVersion),
      );
    } finally {
      this.starting--;
      const left = (this.reserved.get(client) ?? 1) - 1;
      if (left > 0) this.reserved.set(client, left);
      else this.reserved.delete(client);
    }
  }

  /**
   * SEP-1699 on the session's streams. A request of a session that negotiated a revision taking
   * priming events is handed to the SDK under that revision (see setProtocolVersionHeader). The
   * SDK primes POST streams; the standalone GET stream it leaves unprimed, so it is primed here:
   * an event id to resume from and the `retry` delay, before anything else on the stream. A GET
   * that resumes (`Last-Event-ID`) is a replay of another stream and is not primed.
   */
  private primeStreams(req: IncomingMessage, res: ServerResponse, session: Session): void {
    if (session.protocolVersion < PRIMING_REVISION) return;
    const named = req.headers['mcp-protocol-version'];
    if (
      typeof named === 'string' &&
      named < session.protocolVersion &&
      SUPPORTED_PROTOCOL_VERSIONS.includes(named)
    )
      setProtocolVersionHeader(req, session.protocolVersion);
    if (req.method !== 'GET' || req.headers['last-event-id'] !== undefined) return;
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
    const retryMs = this.options.sseRetryMs ?? DEFAULT_SSE_RETRY_MS;
    res.writeHead = ((...args: unknown[]) => {
      const out = writeHead(...args);
      res.writeHead = writeHead as typeof res.writeHead;
      if (args[0] === 200 && isEventStream(args[typeof args[1] === 'string' ? 2 : 1])) {
        const id = session.events.prime(STANDALONE_STREAM_ID);
        res.write(`id: ${id}\nretry: ${retryMs}\ndata: \n\n`);
      }
      return out;
    }) as typeof res.writeHead;
  }

  /** True when `req` names an open session of this endpoint and a pre-2026 protocol revision (or none). */
  private isLiveSessionRequest(req: IncomingMessage): boolean {
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId !== 'string' || !this.sessions.has(sessionId)) return false;
    const version = req.headers['mcp-protocol-version'];
    return version === undefined || (typeof version === 'string' && version < STATELESS_REVISION);
  }

  /**
   * Makes room for a new session of `client`, or says why there is none. At its share, the client's
   * least recently used idle session is closed; at the endpoint's total, too (never another
   * client's: the total bounds memory, and a client may not buy room with someone else's session).
   */
  private admitSession(client: string): AmfError | undefined {
    const perClient = this.options.maxSessionsPerClient ?? DEFAULT_MAX_SESSIONS_PER_CLIENT;
    while (this.sessionsOf(client) >= perClient)
      if (!this.evictIdle(client)) {
        const held = this.sessionsOf(client);
        return new AmfError(
          'RATE_LIMITED',
          `too many MCP sessions from ${client}: all ${held} are in use (a request in flight or a stream open), at most ${perClient}; end one (HTTP DELETE with Mcp-Session-Id) or retry once one is done`,
          { client, open_sessions: held, max_sessions_per_client: perClient },
        );
      }
    const max = this.options.maxSessions ?? DEFAULT_MAX_SESSIONS;
    while (this.sessions.size + this.starting >= max)
      if (!this.evictIdle(client))
        return new AmfError(
          'OVERLOADED',
          `the MCP endpoint holds its maximum of ${max} sessions; try again later`,
          {
            max_sessions: max,
          },
        );
    return undefined;
  }

  /**
   * Closes the least recently used idle session of `client`, those never used after `initialize`
   * first; false when every session of the client is busy.
   */
  private evictIdle(client: string): boolean {
    let victim: Session | undefined;
    for (const s of this.byClient.get(client) ?? []) {
      if (s.open > 0) continue;
      if (!victim || (victim.used && !s.used) || (victim.used === s.used && s.lastUsed < victim.lastUsed))
        victim = s;
    }
    if (!victim) return false;
    this.endSession(victim);
    return true;
  }

  /** Starts a session of `client` (it exists once the SDK accepted the `initialize`). */
  private async startSession(
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    client: string,
    protocolVersion: string,
  ): Promise<void> {
    const server = this.options.createServer({ caller: req.socket.remoteAddress ?? 'unknown' });
    const events = new SessionEventStore();
    let session: Session | undefined;
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      // Answers are SSE streams, never the SDK's JSON mode (`enableJsonResponse`): in SDK 1.32.2
      // that mode keeps every answered POST of a session (its stream entry, the resolved Response)
      // until the session ends, without bound on a long session such as the coordinator's link to
      // a worker (typescript-sdk issue 2559, fixed only on its v2 line). SSE answers are as fast;
      // test/mcp/mcpSessions.test.ts checks that a long session's calls leave the heap flat.
      eventStore: events,
      retryInterval: this.options.sseRetryMs ?? DEFAULT_SSE_RETRY_MS,
      onsessioninitialized: (id) => {
        session = {
          id,
          server,
          transport,
          client,
          open: 0,
          lastUsed: Date.now(),
          used: false,
          protocolVersion,
          events,
        };
        this.sessions.set(id, session);
        let mine = this.byClient.get(client);
        if (!mine) this.byClient.set(client, (mine = new Set()));
        mine.add(session);
      },
      onsessionclosed: (id) => this.removeSession(id),
    });
    transport.onclose = () => {
      if (transport.sessionId) this.removeSession(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    // An initialize that failed validation leaves no session: release its server.
    if (!session) await server.close();
  }

  /** Forgets a session once (DELETE, transport closed, expiry, eviction). */
  private removeSession(id: string): void {
    const session = this.sessions.get(id);
    if (!session) return;
    this.sessions.delete(id);
    const mine = this.byClient.get(session.client);
    mine?.delete(session);
    if (mine?.size === 0) this.byClient.delete(session.client);
  }

  /** Forgets a session and closes its SDK server: a later request with its id gets 404. */
  private endSession(session: Session): void {
    this.removeSession(session.id);
    void session.server.close().catch(() => undefined);
  }

  /** Closes sessions nobody has used for the idle time; a session with an open request is in use. */
  private expireIdle(): void {
    const cutoff = Date.now() - this.idleMs;
    for (const session of this.sessions.values()) {
      if (session.open > 0 || session.lastUsed > cutoff) {
        session.events.prune();
        continue;
      }
      this.endSession(session);
    }
  }

  /** Resolves once every POST being answered is done, or after `ms`. */
  private async answered(ms: number): Promise<void> {
    if (this.answering.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([...this.answering].map((res) => new Promise((resolve) => res.once('close', resolve)))),
      new Promise((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
    ]);
    clearTimeout(timer);
  }

  /**
   * Closes every session (their SSE streams end). A call still in flight is answered first with
   * STOPPING_ERROR on its own response (an SSE stream or JSON), for at most STOP_ANSWER_WAIT_MS.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweepTimer);
    this.stopper.abort();
    for (const stop of [...this.stopListeners]) stop();
    this.stopListeners.clear();
    await this.answered(STOP_ANSWER_WAIT_MS);
    const all = [...this.sessions.values()];
    this.sessions.clear();
    this.byClient.clear();
    await Promise.allSettled([...all.map((s) => s.server.close()), this.stateless?.close()]);
  }
}
