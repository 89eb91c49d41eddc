/**
 * The stateless MCP revision 2026-07-28 on an AMF `/mcp`, served by the official v2 SDK
 * (`@modelcontextprotocol/server`). `McpEndpoint` keeps the session-based 1.32.2 path for every
 * request the SDK classifies as legacy and hands the rest here (the "hybrid" form of
 * docs/decisions.md). The v2 handler answers with `legacy: 'reject'`: 2025-era serving stays with
 * the sessionful path, which keeps the 404 for unknown sessions and the list_changed broadcast.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  createMcpHandler,
  isLegacyRequest,
  Server,
  type CallToolResult as V2CallToolResult,
  type McpHttpHandler,
  type McpRequestContext,
  type Tool as V2Tool,
} from '@modelcontextprotocol/server';
import type { CallToolResult, Progress, Tool } from '@modelcontextprotocol/sdk/types.js';

/** MCP revision served by the stateless leg. */
export const MCP_STATELESS_REVISION = '2026-07-28';

/**
 * The tools of an endpoint, independent of the protocol revision: both the sessionful 1.32.2 path
 * and the stateless 2026-07-28 path can serve them from this one definition.
 */
export interface McpToolSurface {
  /** Server name and version announced to 2026-07-28 clients (`server/discover`). */
  info: { name: string; version: string };
  instructions?: string;
  /** The tool list can change: announce `tools.listChanged` (see `McpEndpoint.notifyToolsChanged`). */
  listChanged?: boolean;
  list(): Tool[];
  /** Runs one tool; an unknown name throws an error carrying a JSON-RPC `code`. */
  call(
    name: string,
    args: Record<string, unknown>,
    ctx: {
      caller: string;
      signal: AbortSignal;
      /** Set when the caller asked for progress: relays one notification on the request's stream. */
      onProgress?: (progress: Progress) => void;
    },
  ): Promise<CallToolResult>;
}

/**
 * Header carrying the caller's remote address from the node request into the per-request server
 * (the factory sees only the web `Request`). Set by this module on every request it builds; a
 * client-sent value is always overwritten.
 */
const CALLER_HEADER = 'x-amf-mcp-caller';

/** The v2 handler of one endpoint. */
export class StatelessMcp {
  private readonly handler: McpHttpHandler;

  constructor(
    surface: McpToolSurface,
    private readonly maxBodyBytes: number,
  ) {
    const factory = (ctx: McpRequestContext): Server => {
      const caller = ctx.requestInfo?.headers.get(CALLER_HEADER) ?? 'unknown';
      const server = new Server(surface.info, {
        capabilities: { tools: surface.listChanged ? { listChanged: true } : {} },
        ...(surface.instructions ? { instructions: surface.instructions } : {}),
      });
      // Same wire shape; 1.32.2 only types JSON-Schema properties more loosely than v2.
      server.setRequestHandler('tools/list', () => ({ tools: surface.list() as V2Tool[] }));
      server.setRequestHandler('tools/call', async (request, handlerCtx) => {
        // Progress travels on the request's own stream (the answer becomes SSE once one is sent).
        const token = request.params._meta?.progressToken;
        const onProgress =
          token === undefined
            ? undefined
            : (progress: Progress) =>
                void handlerCtx.mcpReq
                  .notify({ method: 'notifications/progress', params: { ...progress, progressToken: token } })
                  .catch(() => undefined);
        return (await surface.call(request.params.name, request.params.arguments ?? {}, {
          caller,
          signal: handlerCtx.mcpReq.signal,
          ...(onProgress ? { onProgress } : {}),
        })) as V2CallToolResult;
      });
      return server;
    };
    // 'auto' answers with one JSON body unless a handler sends something before its result (ours
    // send nothing; subscriptions/listen is SSE anyway). Same wire result as 'json', which the SDK
    // would announce with a console warning at every start.
    this.handler = createMcpHandler(factory, {
      legacy: 'reject',
      responseMode: 'auto',
      maxRequestBodySize: maxBodyBytes,
    });
  }

  /**
   * Whether the request belongs to the session-based path (`parsed` is the JSON body of a POST,
   * already read and bounded by the endpoint).
   */
  async isLegacy(req: IncomingMessage, raw: Buffer | undefined, parsed: unknown): Promise<boolean> {
    const request = toWebRequest(req, raw, undefined);
    return isLegacyRequest(request, raw === undefined ? undefined : parsed, {
      maxRequestBodySize: this.maxBodyBytes,
    });
  }

  /** Serves one 2026-07-28 request and writes the answer (a JSON body, or an SSE listen stream). */
  async handle(req: IncomingMessage, res: ServerResponse, raw: Buffer | undefined): Promise<void> {
    const aborted = new AbortController();
    // A client that goes away cancels its tool call and ends its listen stream.
    res.once('close', () => aborted.abort());
    const response = await this.handler.fetch(toWebRequest(req, raw, aborted.signal));
    await writeWebResponse(res, response);
  }

  /** Tells open `subscriptions/listen` streams that the tool list changed. */
  toolsChanged(): void {
    this.handler.notify.toolsChanged();
  }

  async close(): Promise<void> {
    await this.handler.close();
  }
}

/** Builds the web `Request` the v2 handler takes from a node request whose body was already read. */
function toWebRequest(
  req: IncomingMessage,
  raw: Buffer | undefined,
  signal: AbortSignal | undefined,
): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name === CALLER_HEADER) continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  headers.set(CALLER_HEADER, req.socket.remoteAddress ?? 'unknown');
  const method = req.method ?? 'GET';
  // A fixed origin: the Host header is client input and only the path matters to the handler.
  return new Request(new URL(req.url ?? '/mcp', 'http://127.0.0.1'), {
    method,
    headers,
    ...(raw !== undefined && method !== 'GET' && method !== 'HEAD' ? { body: raw } : {}),
    ...(signal ? { signal } : {}),
  });
}

async function writeWebResponse(res: ServerResponse, response: Response): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  res.once('close', () => void reader.cancel().catch(() => undefined));
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch {
    // The client went away mid-stream: nothing left to answer.
  }
  res.end();
}
