/**
 * The MCP client side of an AMF agent: connects to every configured MCP server (Streamable HTTP or
 * stdio), lists their tools under namespaced names `<server>__<tool>`, applies each server's
 * allow/deny filter, and routes calls back to the right server with a per-request timeout and a
 * bounded result. One server failing to connect is logged and skipped, never fatal to the others,
 * because an agent with some tools is more useful than one that refuses to start.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ToolListChangedNotificationSchema,
  type ClientCapabilities,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { McpServerConfig, McpToolFilter } from '../config/config.js';
import { AmfError } from '../errors.js';
import type { Logger } from '../log.js';
import { isLoopbackHost } from '../net/hostRules.js';
import { VERSION } from '../version.js';
import {
  checkServerUrl,
  createMcpFetch,
  DEFAULT_MCP_TIMEOUT_MS,
  MAX_MCP_MESSAGE_BYTES,
  MAX_TOOL_RESULT_CHARS,
  truncateContent,
  type ToolContent,
} from './limits.js';
import { ClearedEnvStdioTransport } from './stdioTransport.js';

/** Separator between server and tool name; double underscore because server names may hold one. */
export const TOOL_NAMESPACE_SEPARATOR = '__';

/** A tool of one connected server, as the agent sees it. */
export interface NamespacedTool {
  /** `<server>__<tool>`: what a model calls. */
  readonly name: string;
  readonly server: string;
  /** The tool's own name on its server. */
  readonly tool: string;
  readonly description: string;
  readonly inputSchema: Tool['inputSchema'];
}

/** The outcome of one tool call, with text already cut to the result limit. */
export interface ToolResult {
  readonly content: ToolContent[];
  /** The server reported a tool-level failure (MCP `isError`). */
  readonly isError: boolean;
  /** The text blocks joined by newlines (what a model usually gets). */
  readonly text: string;
  readonly truncated: boolean;
  readonly structuredContent?: Record<string, unknown>;
}

/** Why one configured server is not available. */
export interface ServerFailure {
  readonly server: string;
  readonly error: string;
}

/** Options of `McpClientHub.connect`. */
export interface McpClientHubOptions {
  logger?: Logger;
  /** Where stdio servers' listed variables (and the PATH used to find commands) come from. */
  env?: NodeJS.ProcessEnv;
  /** Refuse plain http:// servers that are not loopback (`mcp.require_tls`). */
  requireTls?: boolean;
  /** Extra headers per HTTP server name (e.g. Authorization), never logged. */
  headers?: Readonly<Record<string, Record<string, string>>>;
  maxMessageBytes?: number;
  maxResultChars?: number;
  /** Called after a server's tool list changed and was re-read. */
  onToolsChanged?: (server: string) => void;
}

/** Options of one tool call. */
export interface CallToolOptions {
  signal?: AbortSignal;
  /** Overrides the server's configured timeout for this call, in ms. */
  timeoutMs?: number;
}

interface Connection {
  readonly config: McpServerConfig;
  readonly client: Client;
  readonly timeoutMs: number;
  tools: NamespacedTool[];
  /** Why the connection was dropped (e.g. the message cap), reported to calls it cut short. */
  closeReason?: AmfError;
}

// Connecting includes starting a stdio server (node, npx, python...), which can take far longer than
// one tool call should; the configured timeout applies to calls, this floor to the handshake.
const MIN_CONNECT_TIMEOUT_MS = 30_000;

/** True when `name` passes a server's filter: allow (null = all) first, then deny. */
export function toolAllowed(filter: McpToolFilter, name: string): boolean {
  if (filter.allow !== null && !filter.allow.includes(name)) return false;
  return !filter.deny.includes(name);
}

/** Connected MCP servers and their tools; create with `McpClientHub.connect`. */
export class McpClientHub {
  private readonly byName = new Map<string, { conn: Connection; tool: NamespacedTool }>();
  /** Sessions opened with `openSession`, still open. */
  private readonly sessions = new Set<Client>();

  private constructor(
    private readonly connections: Map<string, Connection>,
    /** Servers that could not be connected, with the reason (also logged). */
    readonly failures: readonly ServerFailure[],
    private readonly opts: McpClientHubOptions,
  ) {
    this.reindex();
  }

  /**
   * Connects to all `servers` in parallel. Never rejects because of a server: each failure is logged
   * and listed in `failures`, and the hub serves the tools of the servers that did connect.
   */
  static async connect(
    servers: readonly McpServerConfig[],
    opts: McpClientHubOptions = {},
  ): Promise<McpClientHub> {
    const connections = new Map<string, Connection>();
    const failures: ServerFailure[] = [];
    // The hub is created first so list_changed handlers registered during connect can reach it.
    const hub = new McpClientHub(connections, failures, opts);
    await Promise.all(
      servers.map(async (config) => {
        try {
          const conn = await hub.connectOne(config);
          connections.set(config.name, conn);
        } catch (err) {
          const error = err instanceof Error ? err.message : String(err);
          failures.push({ server: config.name, error });
          opts.logger?.warn(
            { server: config.name, err: error },
            'MCP server unavailable; continuing without it',
          );
        }
      }),
    );
    hub.reindex();
    return hub;
  }

  private async connectOne(config: McpServerConfig): Promise<Connection> {
    const timeoutMs = config.timeoutSeconds > 0 ? config.timeoutSeconds * 1000 : DEFAULT_MCP_TIMEOUT_MS;
    // Filled once the connection exists; transport errors before that simply fail the connect.
    let conn: Connection | undefined;
    const oversize = (err: AmfError): void => {
      if (!conn || conn.closeReason) return;
      conn.closeReason = err;
      this.opts.logger?.warn(
        { server: config.name, err: err.message },
        'MCP server broke the message cap; disconnecting it',
      );
      void this.drop(conn);
    };
    const transport = this.transportFor(config, oversize);
    const client = new Client({ name: 'amf', version: VERSION }, { capabilities: {} });
    client.onerror = (err) => {
      if (err instanceof AmfError && err.code === 'PAYLOAD_TOO_LARGE') oversize(err);
      else this.opts.logger?.warn({ server: config.name, err: err.message }, 'MCP transport error');
    };
    // A server that goes away (stdio child exited, cap broken) takes its tools with it.
    client.onclose = () => {
      if (conn) void this.drop(conn);
    };
    try {
      await client.connect(transport, { timeout: Math.max(timeoutMs, MIN_CONNECT_TIMEOUT_MS) });
      conn = { config, client, timeoutMs, tools: [] };
      const connection = conn;
      conn.tools = await this.fetchTools(conn);
      if (client.getServerCapabilities()?.tools?.listChanged) {
        client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
          try {
            connection.tools = await this.fetchTools(connection);
            this.reindex();
            this.opts.onToolsChanged?.(config.name);
          } catch (err) {
            this.opts.logger?.warn(
              { server: config.name, err: (err as Error).message },
              'MCP tools re-list failed',
            );
          }
        });
      }
      this.opts.logger?.info({ server: config.name, tools: conn.tools.length }, 'MCP server connected');
      return conn;
    } catch (err) {
      await client.close().catch(() => undefined);
      throw err;
    }
  }

  /** A new transport to `config`'s server, with the hub's limits; `oversize` hears of a broken cap. */
  private transportFor(config: McpServerConfig, oversize: (err: AmfError) => void): Transport {
    const maxMessageBytes = this.opts.maxMessageBytes ?? MAX_MCP_MESSAGE_BYTES;
    if (config.transport === 'http') {
      const url = checkServerUrl(config.name, config.url);
      if (this.opts.requireTls && url.protocol === 'http:' && !isLoopbackHost(url.hostname))
        throw new AmfError(
          'INVALID_REQUEST',
          `MCP server "${config.name}": plain http to ${url.hostname} refused (mcp.require_tls)`,
        );
      const headers = this.opts.headers?.[config.name];
      return new StreamableHTTPClientTransport(url, {
        fetch: createMcpFetch(config.name, { maxMessageBytes, onOversize: oversize }),
        ...(headers ? { requestInit: { headers } } : {}),
      });
    }
    const logger = this.opts.logger;
    return new ClearedEnvStdioTransport({
      name: config.name,
      command: config.command,
      args: config.args,
      env: config.env,
      maxMessageBytes,
      ...(this.opts.env ? { parentEnv: this.opts.env } : {}),
      onStderr: (text) => logger?.debug({ server: config.name, stderr: text }, 'MCP server stderr'),
    });
  }

  /**
   * A session of its own with a connected server: a new connection (for a stdio server, a new
   * process) declaring `capabilities`, with the same limits as the hub's own. `setup` registers
   * handlers before it connects (the SDK client takes a request handler only for a declared
   * capability). The caller closes it; the hub closes whatever is still open when it closes.
   */
  async openSession(
    server: string,
    capabilities: ClientCapabilities,
    setup: (client: Client) => void = () => undefined,
  ): Promise<Client> {
    const conn = this.connections.get(server);
    if (!conn) throw new AmfError('NOT_FOUND', `MCP server "${server}" is not connected`);
    const client = new Client({ name: 'amf', version: VERSION }, { capabilities });
    const dropOnOversize = (err: AmfError): void => {
      this.opts.logger?.warn(
        { server, err: err.message },
        'MCP server broke the message cap; session closed',
      );
      void client.close().catch(() => undefined);
    };
    client.onerror = (err) => {
      if (err instanceof AmfError && err.code === 'PAYLOAD_TOO_LARGE') dropOnOversize(err);
      else this.opts.logger?.debug({ server, err: err.message }, 'MCP session transport error');
    };
    setup(client);
    this.sessions.add(client);
    const previous = client.onclose;
    client.onclose = () => {
      this.sessions.delete(client);
      previous?.();
    };
    try {
      const transport = this.transportFor(conn.config, dropOnOversize);
      await client.connect(transport, { timeout: Math.max(conn.timeoutMs, MIN_CONNECT_TIMEOUT_MS) });
      return client;
    } catch (err) {
      this.sessions.delete(client);
      await client.close().catch(() => undefined);
      throw err;
    }
  }

  /**
   * Whether a connected server keeps state per session: an HTTP server that gave the hub a session
   * id, and every stdio server (its process is its one session). Such a server, shared, would let
   * one user's state (a log level, a subscription, a toggle) leak into another's.
   */
  isStateful(server: string): boolean {
    const conn = this.connections.get(server);
    if (!conn) return false;
    if (conn.config.transport !== 'http') return true;
    return (conn.client.transport as StreamableHTTPClientTransport | undefined)?.sessionId !== undefined;
  }

  /** A connected server's configuration (its tool filter, its time limit). */
  configOf(server: string): McpServerConfig | undefined {
    return this.connections.get(server)?.config;
  }

  /** The time limit of one request to a connected server, in ms. */
  timeoutOf(server: string): number {
    return this.connections.get(server)?.timeoutMs ?? DEFAULT_MCP_TIMEOUT_MS;
  }

  private async fetchTools(conn: Connection): Promise<NamespacedTool[]> {
    const out: NamespacedTool[] = [];
    let cursor: string | undefined;
    // Bounded pagination: a server that returns cursors forever must not hang the agent.
    for (let page = 0; page < 100; page++) {
      const res = await conn.client.listTools(cursor ? { cursor } : undefined, { timeout: conn.timeoutMs });
      for (const tool of res.tools) {
        if (!toolAllowed(conn.config.tools, tool.name)) continue;
        out.push({
          name: `${conn.config.name}${TOOL_NAMESPACE_SEPARATOR}${tool.name}`,
          server: conn.config.name,
          tool: tool.name,
          description: tool.description ?? '',
          inputSchema: tool.inputSchema,
        });
      }
      cursor = res.nextCursor;
      if (!cursor) break;
    }
    return out;
  }

  /** Removes a connection that failed after connecting, and closes it (rejecting its pending calls). */
  private async drop(conn: Connection): Promise<void> {
    if (this.connections.get(conn.config.name) !== conn) return;
    this.connections.delete(conn.config.name);
    this.reindex();
    const error = conn.closeReason?.message ?? 'connection closed';
    (this.failures as ServerFailure[]).push({ server: conn.config.name, error });
    this.opts.logger?.warn({ server: conn.config.name, err: error }, 'MCP server disconnected');
    await conn.client.close().catch(() => undefined);
  }

  private reindex(): void {
    this.byName.clear();
    for (const conn of this.connections.values())
      for (const tool of conn.tools) this.byName.set(tool.name, { conn, tool });
  }

  /** Names of the servers that connected. */
  get servers(): string[] {
    return [...this.connections.keys()];
  }

  /** The SDK client of a connected server (for re-exporting its resources and prompts). */
  clientOf(server: string): Client | undefined {
    return this.connections.get(server)?.client;
  }

  /** Every allowed tool of every connected server, namespaced. */
  listTools(): NamespacedTool[] {
    return [...this.byName.values()].map((e) => e.tool);
  }

  /**
   * Calls the tool `name` (`<server>__<tool>`). Unknown or filtered-out names are NOT_FOUND; a
   * timeout is TIMEOUT; a tool that reports failure resolves with `isError: true`.
   */
  async callTool(
    name: string,
    args: Record<string, unknown> = {},
    options: CallToolOptions = {},
  ): Promise<ToolResult> {
    const entry = this.byName.get(name);
    if (!entry)
      throw new AmfError(
        'NOT_FOUND',
        `no MCP tool "${name}" (known: ${[...this.byName.keys()].join(', ') || 'none'})`,
      );
    const { conn, tool } = entry;
    const timeout = options.timeoutMs ?? conn.timeoutMs;
    let res: Awaited<ReturnType<Client['callTool']>>;
    try {
      res = await conn.client.callTool({ name: tool.tool, arguments: args }, undefined, {
        timeout,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (err) {
      const e = err as Error & { code?: number };
      if (e.code === -32001)
        throw new AmfError('TIMEOUT', `MCP tool "${name}" did not answer within ${timeout} ms`);
      if (conn.closeReason)
        throw new AmfError(
          conn.closeReason.code,
          `MCP tool "${name}" failed: ${conn.closeReason.message}; server disconnected`,
        );
      if (err instanceof AmfError) throw err;
      throw new AmfError('UNAVAILABLE', `MCP tool "${name}" failed: ${e.message}`, undefined, { cause: err });
    }
    const raw = (Array.isArray(res.content) ? res.content : []) as ToolContent[];
    const { content, truncated } = truncateContent(raw, this.opts.maxResultChars ?? MAX_TOOL_RESULT_CHARS);
    const text = content
      .filter((c) => c.type === 'text' && typeof c.text === 'string')
      .map((c) => c.text)
      .join('\n');
    const structured = res.structuredContent as Record<string, unknown> | undefined;
    return {
      content,
      isError: res.isError === true,
      text,
      truncated,
      ...(structured && !truncated ? { structuredContent: structured } : {}),
    };
  }

  /** Closes every connection (stdio servers are stopped); safe to call twice. */
  async close(): Promise<void> {
    const conns = [...this.connections.values()];
    const sessions = [...this.sessions];
    this.connections.clear();
    this.byName.clear();
    this.sessions.clear();
    await Promise.all([
      ...conns.map((c) => c.client.close().catch(() => undefined)),
      ...sessions.map((c) => c.close().catch(() => undefined)),
    ]);
  }
}
