/**
 * `amf mcp`: a stdio MCP server for IDEs (Claude Desktop, Cursor, VS Code) that proxies the
 * coordinator's aggregate `/mcp` endpoint (Streamable HTTP): tools, resources and templates,
 * prompts, completions, logging, subscriptions and progress, and the agents' sampling,
 * elicitation and roots requests back to the IDE (protocols/mcp/proxy.ts). stdout carries the
 * protocol, so everything else (logs, errors) goes to stderr.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { AmfError } from '../errors.js';
import type { Logger } from '../log.js';
import { checkServerUrl, createMcpFetch } from '../mcpClient/limits.js';
import { startMcpProxy, type McpProxy } from '../protocols/mcp/proxy.js';
import { VERSION } from '../version.js';

export { MCP_PROXY_CALL_TIMEOUT_MS, type McpProxy } from '../protocols/mcp/proxy.js';

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
  try {
    const proxy = await startMcpProxy({
      endpoint,
      headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
      fetch: createMcpFetch('coordinator'),
      downstream: options.downstream ?? new StdioServerTransport(),
      info: { name: 'amf', version: VERSION },
      instructions: 'Tools of the agents in an AMF mesh; each call is dispatched to an agent.',
      ...(options.callTimeoutMs !== undefined ? { callTimeoutMs: options.callTimeoutMs } : {}),
      ...(log ? { logger: log } : {}),
    });
    log?.info({ endpoint: endpoint.href }, 'connected to the coordinator MCP endpoint');
    return proxy;
  } catch (err) {
    throw upstreamRefusal(endpoint, err);
  }
}

/** The connect failure as a message that names the fix. */
function upstreamRefusal(endpoint: URL, err: unknown): AmfError {
  // The SDK's StreamableHTTPError carries the HTTP status as `code`: name the likely fix for 401/403.
  const status = (err as { code?: unknown }).code;
  if (status === 401 || status === 403)
    return new AmfError(
      'UNAUTHORIZED',
      `the coordinator's MCP endpoint ${endpoint.href} refused the request (HTTP ${status}): the operator key is missing or wrong: set AMF_API_KEY, or give the coordinator's --data-dir (its operator.key is read)`,
    );
  return new AmfError(
    'UNAVAILABLE',
    `cannot reach the coordinator's MCP endpoint ${endpoint.href}: ${(err as Error).message}`,
  );
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
