/**
 * One MCP Streamable HTTP endpoint (`/mcp`) on node:http, shared by workers and the coordinator.
 * The official SDK transport does the protocol work (JSON-RPC framing, SSE, `MCP-Protocol-Version`
 * checks, 404 for ended sessions); this module adds what the SDK leaves to the host: one SDK
 * `Server` per session (the SDK binds a server to one transport), a session table, `Origin`
 * validation, a bounded body, and broadcast of notifications to every open session. Given a
 * protocol-neutral tool surface, it also serves the stateless revision 2026-07-28 (statelessMcp.ts).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { AmfError } from '../../errors.js';
import { readBody } from '../../http/httpKit.js';
import {
  httpStatusFor,
  JSONRPC_PARSE_ERROR,
  JSONRPC_SERVER_ERROR,
  jsonRpcErrorBody,
} from '../../http/wireErrors.js';
import { isLoopbackHost } from '../../net/hostRules.js';
import { StatelessMcp, type McpToolSurface } from './statelessMcp.js';

export type { McpToolSurface } from './statelessMcp.js';

/** MCP revision AMF agents announce in `protocols_supported` (the SDK's latest). */
export const MCP_PROTOCOL = 'MCP/2025-11-25';

/** Options of an MCP endpoint. */
export interface McpEndpointOptions {
  /** Builds the SDK server of one new session; `caller` is the client's remote address. */
  createServer: (session: { caller: string }) => McpServer;
  /** Largest accepted request body (default 4 MiB: above the policy's 1 MiB argument limit). */
  maxBodyBytes?: number;
  /** Most concurrent sessions kept; the oldest is closed beyond it (default 1000). */
  maxSessions?: number;
  /** Extra allowed `Origin` values besides localhost ones (exact match, e.g. `https://ide.example`). */
  allowedOrigins?: string[];
  /**
   * Answer requests with one `application/json` body instead of an SSE stream (both are valid
   * Streamable HTTP). For servers that send nothing before the response: cheaper for both sides.
   */
  jsonResponse?: boolean;
  /** Sees every request before it is handled (e.g. to note the coordinator's fingerprint header). */
  onRequest?: (req: IncomingMessage) => void;
  /**
   * The endpoint's tools, protocol-neutral. With it, requests of the stateless revision 2026-07-28
   * are served by the v2 SDK (statelessMcp.ts); without it, every request takes the session path.
   */
  tools?: McpToolSurface;
}

interface Session {
  server: McpServer;
  transport: StreamableHTTPServerTransport;
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

function isInitialize(body: unknown): boolean {
  const one = (m: unknown) =>
    typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'initialize';
  return Array.isArray(body) ? body.some(one) : one(body);
}

/**
 * An MCP endpoint: route POST, GET and DELETE of `/mcp` to `handle`. Session-based revisions always;
 * the stateless revision too when `tools` is given.
 */
export class McpEndpoint {
  private readonly sessions = new Map<string, Session>();
  private closed = false;
  private readonly stateless: StatelessMcp | undefined;

  constructor(private readonly options: McpEndpointOptions) {
    this.stateless = options.tools
      ? new StatelessMcp(options.tools, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES)
      : undefined;
  }

  /** Number of open sessions. */
  get sessionCount(): number {
    return this.sessions.size;
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
    // The SDK's own classification decides the era, so the two paths can never disagree.
    if (this.stateless && !(await this.stateless.isLegacy(req, raw, parsed))) {
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
      await session.transport.handleRequest(req, res, parsed);
      return;
    }
    if (req.method !== 'POST' || !isInitialize(parsed)) {
      // -32000 rather than -32600: the request is valid JSON-RPC, only the session header is missing.
      const e = new AmfError('INVALID_REQUEST', 'Bad Request: Mcp-Session-Id header is required');
      jsonRpcError(res, e, JSONRPC_SERVER_ERROR);
      return;
    }
    await this.startSession(req, res, parsed);
  }

  private async startSession(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const server = this.options.createServer({ caller: req.socket.remoteAddress ?? 'unknown' });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: this.options.jsonResponse === true,
      onsessioninitialized: (id) => {
        this.sessions.set(id, { server, transport });
        this.evictOldest();
      },
      onsessionclosed: (id) => {
        this.sessions.delete(id);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) this.sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    // An initialize that failed validation leaves no session: release its server.
    if (!transport.sessionId || !this.sessions.has(transport.sessionId)) await server.close();
  }

  private evictOldest(): void {
    const max = this.options.maxSessions ?? 1000;
    while (this.sessions.size > max) {
      const [id, oldest] = this.sessions.entries().next().value as [string, Session];
      this.sessions.delete(id);
      void oldest.server.close().catch(() => undefined);
    }
  }

  /** Closes every session (their SSE streams end). */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.allSettled([...all.map((s) => s.server.close()), this.stateless?.close()]);
  }
}
