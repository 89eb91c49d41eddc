/**
 * The federated MCP catalog behind the coordinator's `POST /mcp` (Model C): the tools of every live
 * admitted agent that announces an MCP endpoint, under federated wire names, with an OPA decision,
 * an authentication-tier check and an audit record on every call (forward.ts). Calls are
 * forwarded (Model B) through the agents' shared clients (agents.ts).
 */
import { createHash } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type {
  CallToolResult,
  ClientCapabilities,
  LoggingLevel,
  LoggingMessageNotification,
  Progress,
  Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { AgentRegistry, RegisteredAgent } from '../../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../../registry/policyNotices.js';
import type { PolicyEngine } from '../../../policy/policyEngine.js';
import type { McpCallCredentials } from './callAuth.js';
import type { McpAuditLog } from './audit.js';
import type { TlsPinStore } from './tlsPins.js';
import { federatedCatalog, ToolNamer, type FederatedTool } from './toolNames.js';
import type { AgentCatalog } from './agentCatalog.js';
import { BareNames, type BareCollision } from './bareNames.js';
import type { FederationEntry } from './resources.js';
import { buildFederatedExtras, grantBareToolNames, type FederatedExtras } from './extras.js';
import { guardedForward, type ForwardDeps, type ForwardKind } from './forward.js';
import { FederatedAgents } from './agents.js';
import { TOOL_CALL_ANSWERS } from './toolCall.js';
import { CALLER_META_KEY } from '../workerCallers.js';
import { callToolDirect } from './directToolCall.js';
import { FederatedLogLevels } from './logging.js';
import { AgentSubscriptions } from './subscriptions.js';
import type { LogFn } from '../../../log.js';

export type { McpCallCredentials } from './callAuth.js';
export type { FederatedTool } from './toolNames.js';
export type { FederatedExtras } from './extras.js';
export { MCP_TLS_PIN_MISMATCH_CODE } from './forward.js';

/** Options of the federation. */
export interface McpFederationOptions {
  registry: AgentRegistry;
  policy: PolicyEngine;
  notices: PolicyNotices;
  audit: McpAuditLog;
  version: string;
  /** Time limit of one forwarded call (default 60 s). */
  callTimeoutMs?: number;
  /** SPIFFE bearer tier (default `NO_CALL_CREDENTIALS`: not built yet). */
  credentials?: McpCallCredentials;
  /** TOFU pins of `https://` agents; absent, https agents are verified against the system CAs. */
  pins?: TlsPinStore;
  /** Sent as `X-AMF-Coordinator-Fingerprint` on every forwarded request. */
  coordinatorFingerprint?: string;
  log?: LogFn;
  /** List items under the agent's own names when no other agent claims them (bareNames.ts). */
  bareNames?: boolean;
}

/** Who is calling through the federated endpoint. */
export interface McpCaller {
  caller: string;
  sessionId: string | null;
  /**
   * A secret of the caller's session from which each agent gets a name for it in
   * `_meta["amf/caller"]` (callerMeta), so that an agent that keeps state per caller (re-exported
   * servers) tells callers apart on the shared link.
   */
  key?: string;
}

/**
 * The `_meta` that names `who` to agent `agentId`, or undefined for an anonymous caller. Each agent
 * gets a name of its own for the same caller (a hash of the caller's key, which never leaves the
 * coordinator, and the agent's id): every agent sees the names, and one agent must not be able to
 * pass for a caller at another.
 */
export function callerMeta(who: McpCaller, agentId: string): Record<string, string> | undefined {
  if (who.key === undefined) return undefined;
  const name = createHash('sha256').update(`${who.key}\0${agentId}`).digest('base64url').slice(0, 32);
  return { [CALLER_META_KEY]: name };
}

function toolAlias(agent: RegisteredAgent): string | undefined {
  const fromCard = (agent.card?.['x-amf'] as { tool_alias?: unknown } | undefined)?.tool_alias;
  if (typeof fromCard === 'string') return fromCard;
  return agent.record.tool_alias;
}

/** The federated catalog and call router. */
export class McpFederation {
  private readonly namer = new ToolNamer();
  private readonly listeners = new Set<() => void>();
  private readonly extrasListeners = new Set<(kind: 'resources' | 'prompts') => void>();
  private readonly bare: BareNames | undefined;
  private catalogCache: Map<string, FederatedTool> | undefined;
  private listedCache: Tool[] | undefined;
  private entriesCache: FederationEntry[] = [];
  private extrasCache: FederatedExtras | undefined;
  private lastSignature = '';
  private readonly lastExtrasSignature = { resources: '', prompts: '' };
  /** Agent-side resource subscriptions shared by the coordinator's sessions. */
  readonly subscriptions = new AgentSubscriptions();
  /** The log levels the coordinator's sessions asked for; agents get the most verbose one. */
  readonly logLevels = new FederatedLogLevels((level) => this.setLogLevel(level));
  private unsubscribe: (() => void) | undefined;
  private readonly agents: FederatedAgents;

  constructor(private readonly options: McpFederationOptions) {
    this.bare = options.bareNames ? new BareNames() : undefined;
    this.agents = new FederatedAgents(options, () => this.changed());
  }

  /** Follows the registry: agents with an MCP endpoint are listed while live and not disabled. */
  start(): void {
    const offReg = this.options.registry.onChange((change) => {
      const id = change.agent.record.agent_id;
      if (change.kind === 'offline') this.agents.drop(id);
      else void this.agents.refresh(id);
    });
    // A card arriving after admission may carry the agent's tool alias.
    const offCard = this.options.registry.onCard((agentId) => {
      if (this.agents.has(agentId)) this.changed();
    });
    // A disabled agent's tools leave the catalog (its client stays), and come back when enabled.
    const offSwitch = this.options.registry.onDisablement((change) => {
      if (this.agents.has(change.agentId)) this.changed();
    });
    this.unsubscribe = () => {
      offReg();
      offCard();
      offSwitch();
    };
    for (const agent of this.options.registry.list())
      if (agent.status === 'live') void this.agents.refresh(agent.record.agent_id);
  }

  /** Registers a listener called when the catalog changed (→ `notifications/tools/list_changed`). */
  onToolsChanged(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The current catalog, keyed by wire name. */
  catalog(): Map<string, FederatedTool> {
    if (this.catalogCache) return this.catalogCache;
    const entries: Array<{
      agentId: string;
      alias?: string | undefined;
      tools: Tool[];
      offer: AgentCatalog;
    }> = [];
    for (const agent of this.options.registry.list()) {
      const id = agent.record.agent_id;
      const state = this.agents.get(id);
      if (!state || agent.status !== 'live' || this.options.registry.isDisabled(id)) continue;
      const offersMore =
        state.offer.resources.length + state.offer.templates.length + state.offer.prompts.length > 0 ||
        Object.keys(state.offer.capabilities).some((k) => k !== 'tools');
      if (state.tools.length === 0 && !offersMore) continue;
      entries.push({ agentId: id, alias: toolAlias(agent), tools: state.tools, offer: state.offer });
    }
    const { prefixes, newCollisions } = this.namer.resolve(entries);
    for (const c of newCollisions) {
      this.options.notices.warn({
        reason: 'tool_alias_collision',
        message: `tool alias "${c.alias}" is claimed by ${c.agents.join(' and ')}: rejected for all of them, their tools keep namespaced names`,
        details: { alias: c.alias, agents: c.agents },
      });
    }
    const { catalog, skipped } = federatedCatalog(entries, prefixes);
    for (const s of skipped)
      this.options.log?.('warn', 'MCP tool left out of the federation: wire name invalid or taken', s);
    this.entriesCache = entries.map((e) => ({
      agentId: e.agentId,
      prefix: prefixes.get(e.agentId)!,
      catalog: e.offer,
    }));
    const toolCollisions: BareCollision[] = [];
    this.listedCache = grantBareToolNames(catalog, this.bare, toolCollisions);
    this.warnBareCollisions(toolCollisions);
    this.catalogCache = catalog;
    return catalog;
  }

  private warnBareCollisions(collisions: readonly BareCollision[]): void {
    for (const c of collisions)
      this.options.notices.warn({
        reason: 'bare_name_collision',
        message: `${c.kind} "${c.name}" is served by ${c.agents.join(' and ')}: no bare name for any of them, they keep namespaced names`,
        details: { kind: c.kind, name: c.name, agents: c.agents },
      });
  }

  /** Tool definitions for `tools/list`. */
  listTools(): Tool[] {
    this.catalog();
    return this.listedCache ?? [];
  }

  /** The federated resources and prompts (rebuilt after every catalog change). */
  extras(): FederatedExtras {
    if (this.extrasCache) return this.extrasCache;
    this.catalog();
    const collisions: BareCollision[] = [];
    this.extrasCache = buildFederatedExtras(this.entriesCache, this.bare, collisions);
    this.warnBareCollisions(collisions);
    return this.extrasCache;
  }

  /** Called when the federated resources or prompts changed (→ their list_changed notifications). */
  onExtrasChanged(listener: (kind: 'resources' | 'prompts') => void): () => void {
    this.extrasListeners.add(listener);
    return () => this.extrasListeners.delete(listener);
  }

  /** Called on every `notifications/resources/updated` an agent sends (agent id, agent URI). */
  onResourceUpdated(listener: (agentId: string, uri: string) => void): () => void {
    return this.agents.onResourceUpdated(listener);
  }

  /** Called on every log message an agent sends the coordinator. */
  onAgentLog(listener: (agentId: string, params: LoggingMessageNotification['params']) => void): () => void {
    return this.agents.onAgentLog(listener);
  }

  /** The wire prefix of an agent (alias or slug), for naming what it sends. */
  prefixOf(agentId: string): string {
    this.catalog();
    return this.entriesCache.find((e) => e.agentId === agentId)?.prefix ?? this.namer.slug(agentId);
  }

  /** Sets the log level of every agent that offers logging (agents.ts). */
  setLogLevel(level: LoggingLevel | undefined): Promise<void> {
    return this.agents.setLogLevel(level);
  }

  /**
   * Runs `run` against the agent behind a resolved target with the same policy decision, auth
   * tier, audit record and pin handling as a tool call (forward.ts).
   */
  forward<T>(
    kind: ForwardKind,
    wireName: string,
    target: { agentId: string; name: string } | undefined,
    argumentBytes: number,
    who: McpCaller,
    run: (client: Client) => Promise<T>,
  ): Promise<T> {
    return guardedForward(this.forwardDeps(target), { kind, wireName, target, argumentBytes, who }, run);
  }

  /**
   * Handles one `tools/call`: policy, auth tier, forward, audit. Unknown names are JSON-RPC errors.
   * The agent's result (every content item: text, image, audio, resource) is returned unchanged.
   * With `onProgress`, the forwarded call carries a progress token of its own and each progress
   * notification the agent sends for it is handed to `onProgress` (for the caller's own token).
   */
  call(
    wireName: string,
    args: Record<string, unknown>,
    who: McpCaller,
    signal?: AbortSignal,
    onProgress?: (progress: Progress) => void,
    clientFor?: (agentId: string) => Promise<Client>,
  ): Promise<CallToolResult> {
    const argumentBytes = Buffer.byteLength(JSON.stringify(args));
    const entry = this.catalog().get(wireName);
    const target = entry ? { agentId: entry.agentId, name: entry.tool } : undefined;
    const deps = this.forwardDeps(target, clientFor);
    return guardedForward(
      deps,
      { kind: 'tool', wireName, target, argumentBytes, who },
      async (client) => {
        const timeout = this.options.callTimeoutMs ?? 60_000;
        // The shared client's session without the SDK's request machinery (directToolCall.ts).
        const fetch = clientFor || onProgress ? undefined : this.agents.get(target!.agentId)?.fetch;
        const meta = callerMeta(who, target!.agentId);
        const direct = fetch
          ? {
              client,
              fetch,
              endpoint: deps.endpoint,
              tool: target!.name,
              args,
              timeoutMs: timeout,
              signal,
              ...(meta ? { meta } : {}),
            }
          : undefined;
        return (
          (direct && (await callToolDirect(direct))) ??
          ((await client.callTool(
            { name: target!.name, arguments: args, ...(meta ? { _meta: meta } : {}) },
            undefined,
            {
              // One total time limit: progress does not extend it (no resetTimeoutOnProgress).
              timeout,
              ...(signal ? { signal } : {}),
              ...(onProgress ? { onprogress: onProgress } : {}),
            },
          )) as CallToolResult)
        );
      },
      TOOL_CALL_ANSWERS,
    );
  }

  private forwardDeps(
    target: { agentId: string } | undefined,
    clientFor?: (agentId: string) => Promise<Client>,
  ): ForwardDeps {
    const endpoint = target ? this.agents.endpointOf(target.agentId) : '';
    return {
      policy: this.options.policy,
      audit: this.options.audit,
      notices: this.options.notices,
      registry: this.options.registry,
      auth: this.agents.authTier(endpoint),
      endpoint,
      clientFor: clientFor ?? ((agentId) => this.agents.clientFor(agentId)),
      log: this.options.log,
    };
  }

  /** A connection of its own to an agent for one caller session (agents.ts). */
  openSessionClient(
    agentId: string,
    capabilities: ClientCapabilities,
    setup: (client: Client) => void,
  ): Promise<Client> {
    return this.agents.openSessionClient(agentId, capabilities, setup);
  }

  /** The federation's shared client of an agent (connects on first use). */
  sharedClient(agentId: string): Promise<Client> {
    return this.agents.clientFor(agentId);
  }

  /** Closes every agent client. */
  async close(): Promise<void> {
    this.unsubscribe?.();
    await this.agents.close();
  }

  private changed(): void {
    this.catalogCache = undefined;
    this.listedCache = undefined;
    this.extrasCache = undefined;
    const extras = this.extras();
    for (const kind of ['resources', 'prompts'] as const) {
      const sig =
        kind === 'resources'
          ? JSON.stringify([extras.resources.list(), extras.resources.templates()])
          : JSON.stringify(extras.prompts.list());
      if (sig === this.lastExtrasSignature[kind]) continue;
      this.lastExtrasSignature[kind] = sig;
      for (const l of this.extrasListeners) l(kind);
    }
    const signature = JSON.stringify(this.listTools());
    if (signature === this.lastSignature) return;
    this.lastSignature = signature;
    for (const l of this.listeners) l();
  }
}
