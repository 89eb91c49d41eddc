/**
 * The tools an agent may call, behind one small interface (`ToolProvider`) so the agent loop can run
 * with MCP servers, with an in-process provider in tests, or with none. `connectAfmTools` builds the
 * provider from an AFM file's `tools.mcp`: one `McpClientHub` per server (each stdio server gets
 * exactly the environment its entry lists), allow/deny filters applied by the hub, tool names
 * namespaced `<server>__<tool>` as the hub does, and then made safe for model APIs.
 */
import type { McpServerConfig } from '../../config/config.js';
import { AmfError } from '../../errors.js';
import type { ToolSpec } from '../../llm/types.js';
import type { Logger } from '../../log.js';
import { McpClientHub, type ServerFailure } from '../../mcpClient/mcpClientHub.js';
import type { AfmAuthentication, AfmMcpServer } from '../types.js';

/** What a tool call returned, as the model will see it. */
export interface ToolOutcome {
  readonly text: string;
  /** The tool reported failure; the model is told so and may try something else. */
  readonly isError: boolean;
}

/** The tools of an agent. Names must match `[A-Za-z0-9_-]{1,64}` (OpenAI's and Anthropic's rule). */
export interface ToolProvider {
  listTools(): readonly ToolSpec[];
  /** Rejects with AmfError (NOT_FOUND, TIMEOUT, UNAVAILABLE, ...) when the call itself fails. */
  callTool(
    name: string,
    args: Record<string, unknown>,
    options?: { signal?: AbortSignal },
  ): Promise<ToolOutcome>;
  close(): Promise<void>;
}

/** A provider without tools. */
export const NO_TOOLS: ToolProvider = Object.freeze({
  listTools: () => [],
  callTool: (name: string) =>
    Promise.reject(new AmfError('NOT_FOUND', `no tool "${name}": this agent has no tools`)),
  close: () => Promise.resolve(),
});

/** Per-call timeout of MCP tools (AFM has no field for it). */
export const AFM_TOOL_TIMEOUT_SECONDS = 60;

const MODEL_TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Model APIs accept only `[A-Za-z0-9_-]{1,64}` as a tool name, while MCP names may hold dots or be
 * longer: other characters become `_`, long names are cut, and clashes get a numeric suffix.
 */
export function modelSafeNames(names: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  const used = new Set<string>();
  for (const name of names) {
    let safe = MODEL_TOOL_NAME.test(name)
      ? name
      : name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'tool';
    for (let i = 2; used.has(safe); i++) {
      const suffix = `_${i}`;
      safe = safe.slice(0, 64 - suffix.length) + suffix;
    }
    used.add(safe);
    out.set(name, safe);
  }
  return out;
}

/** HTTP headers for an MCP server's `authentication` (bearer, api-key, basic). */
export function authHeaders(server: string, auth: AfmAuthentication | undefined): Record<string, string> {
  if (!auth) return {};
  switch (auth.type) {
    case 'bearer':
      return { Authorization: `Bearer ${String(auth.token ?? '')}` };
    case 'api-key':
      // The reference runtime sends the bare key in Authorization; `header` picks another one.
      return { [auth.header ?? 'Authorization']: String(auth.api_key ?? '') };
    case 'basic':
      return {
        Authorization: `Basic ${Buffer.from(`${String(auth.username ?? '')}:${String(auth.password ?? '')}`).toString('base64')}`,
      };
    default:
      throw new AmfError(
        'INVALID_REQUEST',
        `MCP server "${server}": authentication type "${auth.type}" is not supported (use bearer, api-key or basic)`,
      );
  }
}

/** The hub configuration of one AFM MCP server entry, and the environment its child may see. */
export function toHubServer(
  entry: AfmMcpServer,
  parentEnv: NodeJS.ProcessEnv,
): { config: McpServerConfig; env: NodeJS.ProcessEnv; headers: Record<string, string> } {
  const tools = { allow: entry.tool_filter?.allow ?? null, deny: entry.tool_filter?.deny ?? [] };
  const t = entry.transport;
  if (t.type === 'http')
    return {
      config: {
        name: entry.name,
        transport: 'http',
        url: t.url,
        timeoutSeconds: AFM_TOOL_TIMEOUT_SECONDS,
        tools,
      },
      env: parentEnv,
      headers: authHeaders(entry.name, t.authentication),
    };
  // The child sees the entry's own `env` and, unless the entry sets it, PATH: a server started
  // through `npx` or a `#!/usr/bin/env node` script cannot start without it. Nothing else leaks.
  const env: NodeJS.ProcessEnv = { ...t.env };
  if (env.PATH === undefined && parentEnv.PATH !== undefined) env.PATH = parentEnv.PATH;
  return {
    config: {
      name: entry.name,
      transport: 'stdio',
      command: t.command,
      args: t.args,
      env: Object.keys(env),
      timeoutSeconds: AFM_TOOL_TIMEOUT_SECONDS,
      tools,
    },
    env,
    headers: {},
  };
}

/** The MCP tools of an AFM agent. */
export class McpToolProvider implements ToolProvider {
  private readonly byModelName = new Map<string, { hub: McpClientHub; name: string }>();
  private specs: ToolSpec[] = [];

  constructor(
    /** One hub per connected server (what `x-amf.mcp.reexport_servers` re-exports). */
    readonly hubs: readonly McpClientHub[],
    /** Servers that could not be used, with the reason (also logged). */
    readonly failures: readonly ServerFailure[],
  ) {
    this.reindex();
  }

  /** Re-reads the hubs' tool lists (after a server's `list_changed` or a disconnect). */
  reindex(): void {
    const all = this.hubs.flatMap((hub) => hub.listTools().map((tool) => ({ hub, tool })));
    const safe = modelSafeNames(all.map((e) => e.tool.name));
    this.byModelName.clear();
    this.specs = all.map(({ hub, tool }) => {
      const name = safe.get(tool.name)!;
      this.byModelName.set(name, { hub, name: tool.name });
      return {
        name,
        description: tool.description,
        inputSchema: tool.inputSchema as Record<string, unknown>,
      };
    });
  }

  listTools(): readonly ToolSpec[] {
    return this.specs;
  }

  async callTool(
    name: string,
    args: Record<string, unknown>,
    options: { signal?: AbortSignal } = {},
  ): Promise<ToolOutcome> {
    const entry = this.byModelName.get(name);
    if (!entry)
      throw new AmfError(
        'NOT_FOUND',
        `no tool "${name}" (known: ${[...this.byModelName.keys()].join(', ') || 'none'})`,
      );
    const res = await entry.hub.callTool(entry.name, args, options.signal ? { signal: options.signal } : {});
    return { text: res.text, isError: res.isError };
  }

  async close(): Promise<void> {
    await Promise.all(this.hubs.map((hub) => hub.close()));
  }
}

/** The MCP client hubs behind a tool provider (none unless it is an McpToolProvider). */
export function connectedHubs(tools: ToolProvider): readonly McpClientHub[] {
  return tools instanceof McpToolProvider ? tools.hubs : [];
}

/** Options of `connectAfmTools`. */
export interface ConnectAfmToolsOptions {
  /** Where stdio PATH comes from (default process.env). */
  env?: NodeJS.ProcessEnv;
  logger?: Logger;
  /** Refuse plain http:// to non-loopback servers. */
  requireTls?: boolean;
}

/**
 * Connects every MCP server of an AFM file in parallel. Never rejects because of one server: like
 * the hub, an unreachable or misconfigured server is logged and listed in `failures`.
 */
export async function connectAfmTools(
  servers: readonly AfmMcpServer[],
  options: ConnectAfmToolsOptions = {},
): Promise<McpToolProvider> {
  const parentEnv = options.env ?? process.env;
  const failures: ServerFailure[] = [];
  // Assigned once the hubs exist; their list_changed callbacks only fire after that.
  const ref: { provider?: McpToolProvider } = {};
  const hubs = await Promise.all(
    servers.map(async (entry) => {
      let server: ReturnType<typeof toHubServer>;
      try {
        server = toHubServer(entry, parentEnv);
      } catch (err) {
        failures.push({ server: entry.name, error: (err as Error).message });
        options.logger?.warn({ server: entry.name, err: (err as Error).message }, 'MCP server unusable');
        return undefined;
      }
      const hub = await McpClientHub.connect([server.config], {
        env: server.env,
        headers: { [entry.name]: server.headers },
        ...(options.logger ? { logger: options.logger } : {}),
        ...(options.requireTls ? { requireTls: true } : {}),
        onToolsChanged: () => ref.provider?.reindex(),
      });
      failures.push(...hub.failures);
      return hub;
    }),
  );
  const provider = new McpToolProvider(
    hubs.filter((h): h is McpClientHub => h !== undefined),
    failures,
  );
  ref.provider = provider;
  return provider;
}
