/**
 * `amf mcp`: a stdio MCP server for IDEs (Claude Desktop, Cursor, VS Code) that proxies the
 * coordinator's aggregate `/mcp` endpoint (Streamable HTTP). tools/list and tools/call are forwarded
 * unchanged (the coordinator already namespaces tools), and the coordinator's
 * `notifications/tools/list_changed` is relayed so the IDE re-reads the catalog when agents come and
 * go. stdout carries the protocol, so everything else (logs, errors) goes to stderr.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  CallToolResultSchema,
  ListToolsRequestSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { AmfError } from '../errors.js';
import type { Logger } from '../log.js';
import { checkServerUrl, createMcpFetch } from '../mcpClient/limits.js';
import { VERSION } from '../version.js';

/**
 * Mesh tools are tasks dispatched to agents, which may take a while (task TTL plus retries), so a
 * proxied call waits longer than a plain MCP request; progress notifications reset the clock.
 */
export const MCP_PROXY_CALL_TIMEOUT_MS = 120_000;

/** Options of `runMcpProxy`. */
export interface McpProxyOptions {
  /** Coordinator base URL (its `/mcp` is used) or the full URL of an MCP endpoint ending in `/mcp`. */
  coordinatorUrl: string;
  apiKey?: string | null;
  logger?: Logger;
  /** The IDE side; default a StdioServerTransport on this process's stdin/stdout. */
  downstream?: Transport;
  callTimeoutMs?: number;
}

/** A running proxy: `done` settles when the IDE side closes. */
export interface McpProxy {
  readonly done: Promise<void>;
  close(): Promise<void>;
}

/** Where the aggregate endpoint is: `<coordinator>/mcp` unless the URL already names an `/mcp` path. */
export function mcpEndpointUrl(coordinatorUrl: string): URL {
  const url = checkServerUrl('coordinator', coordinatorUrl);
  if (!/\/mcp\/?$/.test(url.pathname)) url.pathname = `${url.pathname.replace(/\/+$/, '')}/mcp`;
  return url;
}

/**
 * Connects to the coordinator first (so a wrong URL or key fails fast with a clear message on
 * stderr), then serves the IDE on stdio until it closes stdin.
 */
export async function runMcpProxy(options: McpProxyOptions): Promise<McpProxy> {
  const endpoint = mcpEndpointUrl(options.coordinatorUrl);
  const log = options.logger;
  const headers: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
  let closing = false;
  const upstream = new Client({ name: 'amf-mcp-proxy', version: VERSION }, { capabilities: {} });
  try {
    await upstream.connect(
      new StreamableHTTPClientTransport(endpoint, {
        fetch: createMcpFetch('coordinator'),
        requestInit: { headers },
      }),
    );
  } catch (err) {
    // The SDK's StreamableHTTPError carries the HTTP status as `code`: name the likely fix for 401/403.
    const status = (err as { code?: unknown }).code;
    if (status === 401 || status === 403)
      throw new AmfError(
        'UNAUTHORIZED',
        `the coordinator's MCP endpoint ${endpoint.href} refused the request (HTTP ${status}): the operator key is missing or wrong: set AMF_API_KEY, or give the coordinator's --data-dir (its operator.key is read)`,
      );
    throw new AmfError(
      'UNAVAILABLE',
      `cannot reach the coordinator's MCP endpoint ${endpoint.href}: ${(err as Error).message}`,
    );
  }
  // Set after connecting: a failed connect is reported once, by the error above.
  upstream.onerror = (err) => {
    // Closing aborts the open SSE stream, which the SDK reports as an error: not worth a warning.
    if (!closing) log?.warn({ err: err.message }, 'coordinator MCP connection error');
  };
  log?.info(
    { endpoint: endpoint.href, server: upstream.getServerVersion() },
    'connected to the coordinator MCP endpoint',
  );

  const server = new Server(
    { name: 'amf', version: VERSION },
    {
      capabilities: { tools: { listChanged: true } },
      instructions:
        upstream.getInstructions() ??
        'Tools of the agents in an AMF mesh; each call is dispatched to an agent.',
    },
  );
  const timeout = options.callTimeoutMs ?? MCP_PROXY_CALL_TIMEOUT_MS;
  server.setRequestHandler(ListToolsRequestSchema, (req, extra) =>
    upstream.listTools(req.params, { signal: extra.signal }),
  );
  // The raw request keeps the result as the coordinator sent it (content, isError, structuredContent).
  server.setRequestHandler(CallToolRequestSchema, (req, extra) => {
    // The IDE's progress token means nothing to the coordinator: the SDK replaces it with its own
    // when onprogress is set, and progress coming back is re-labelled with the IDE's token.
    const progressToken = req.params._meta?.progressToken;
    return upstream.request({ method: 'tools/call', params: req.params }, CallToolResultSchema, {
      signal: extra.signal,
      timeout,
      ...(progressToken !== undefined
        ? {
            resetTimeoutOnProgress: true,
            onprogress: (progress) =>
              void extra
                .sendNotification({
                  method: 'notifications/progress',
                  params: { ...progress, progressToken },
                })
                .catch(() => undefined),
          }
        : {}),
    });
  });
  upstream.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    log?.debug('coordinator tool list changed; relaying');
    await server.sendToolListChanged().catch((err: Error) => log?.warn({ err: err.message }, 'relay failed'));
  });

  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const close = async (): Promise<void> => {
    if (closing) return done;
    closing = true;
    await upstream.close().catch(() => undefined);
    await server.close().catch(() => undefined);
    resolveDone();
  };
  server.onclose = () => void close();
  // If the coordinator session ends for good, the IDE is better served by a restart than by errors.
  upstream.onclose = () => {
    if (!closing) log?.warn('coordinator MCP connection closed; stopping');
    void close();
  };
  await server.connect(options.downstream ?? new StdioServerTransport());
  return { done, close };
}

/** The `amf mcp` action: runs the proxy until stdin closes; returns the exit code. */
export async function mcpCommand(options: McpProxyOptions): Promise<number> {
  let proxy: McpProxy;
  try {
    proxy = await runMcpProxy(options);
  } catch (err) {
    process.stderr.write(`amf mcp: ${(err as Error).message}\n`);
    return 1;
  }
  // stdin ending is how IDEs stop stdio servers; the SDK transport does not notice it by itself.
  process.stdin.once('end', () => void proxy.close());
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void proxy.close());
  await proxy.done;
  return 0;
}
