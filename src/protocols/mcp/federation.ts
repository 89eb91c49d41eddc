/**
 * The federated MCP catalog behind the coordinator's `POST /mcp` (Model C): the tools of every live
 * admitted agent that announces an MCP endpoint, under federated wire names, with an OPA decision,
 * an authentication-tier check and an audit record on every call. Calls are forwarded (Model B)
 * through one SDK Client per agent, reused across calls and closed when the agent leaves. Agents on
 * `https://` are TOFU-pinned when they are admitted (tlsPins.ts); see callAuth.ts for the tiers.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ErrorCode,
  LoggingMessageNotificationSchema,
  McpError,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type ClientCapabilities,
  type LoggingLevel,
  type LoggingMessageNotification,
  type Progress,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { AgentRegistry, RegisteredAgent } from '../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../registry/policyNotices.js';
import type { PolicyEngine } from '../../policy/policyEngine.js';
import {
  createAgentFetch,
  isHttps,
  NO_CALL_CREDENTIALS,
  type AgentFetch,
  type McpCallCredentials,
} from './callAuth.js';
import type { McpAuditLog, McpAuditRecord } from './mcpAudit.js';
import {
  findPinMismatch,
  TLS_PIN_MISMATCH_REASON,
  type TlsPinMismatchError,
  type TlsPinStore,
} from './tlsPins.js';
import { federatedCatalog, ToolNamer, type FederatedTool } from './toolNames.js';
import { EMPTY_CATALOG, listAgentCatalog, type AgentCatalog } from './agentCatalog.js';
import { BareNames, type BareCollision } from './bareNames.js';
import type { FederationEntry } from './federatedResources.js';
import { buildFederatedExtras, grantBareToolNames, type FederatedExtras } from './federatedExtras.js';
import { guardedForward, type ForwardKind } from './federatedForward.js';
import { callToolDirect } from './directToolCall.js';
import { FederatedLogLevels } from './federatedLogging.js';
import { AgentSubscriptions } from './federatedSubscriptions.js';
import type { LogFn } from '../../log.js';

export type { McpCallCredentials } from './callAuth.js';
export type { FederatedTool } from './toolNames.js';
export type { FederatedExtras } from './federatedExtras.js';

/** JSON-RPC error code of a call refused because the agent's certificate no longer matches its pin. */
export const MCP_TLS_PIN_MISMATCH_CODE = -32010;

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

interface AgentTools {
  endpoint: string;
  client?: Client;
  connecting?: Promise<Client>;
  tools: Tool[];
  /** Everything else the agent offers (resources, templates, prompts, capabilities). */
  offer: AgentCatalog;
  /** Pinned certificate fingerprint (https endpoints under TOFU). */
  pin?: string;
  fetch?: AgentFetch;
  /** Bumped on every refresh so a slow stale listing cannot overwrite a newer one. */
  generation: number;
}

/** Who is calling through the federated endpoint. */
export interface McpCaller {
  caller: string;
  sessionId: string | null;
}

function toolAlias(agent: RegisteredAgent): string | undefined {
  const fromCard = (agent.card?.['x-amf'] as { tool_alias?: unknown } | undefined)?.tool_alias;
  if (typeof fromCard === 'string') return fromCard;
  return agent.record.tool_alias;
}

function denied(text: string, reasons: string[]): CallToolResult {
  return {
    content: [{ type: 'text', text }],
    isError: true,
    _meta: { 'amf/policy': { decision: 'deny', reasons } },
  };
}

/** The federated catalog and call router. */
export class McpFederation {
  private readonly agents = new Map<string, AgentTools>();
  /**
   * Last tools each agent listed over a verified connection, kept after it leaves: an agent that
   * comes back with a different certificate keeps its tools listed, so calling them gives a clear
   * pin-mismatch refusal instead of "tool not found". Bounded; oldest forgotten first.
   */
  private readonly verifiedTools = new Map<string, Tool[]>();
  private readonly namer = new ToolNamer();
  private readonly listeners = new Set<() => void>();
  private readonly extrasListeners = new Set<(kind: 'resources' | 'prompts') => void>();
  private readonly updateListeners = new Set<(agentId: string, uri: string) => void>();
  private readonly logListeners = new Set<
    (agentId: string, params: LoggingMessageNotification['params']) => void
  >();
  private readonly bare: BareNames | undefined;
  private catalogCache: Map<string, FederatedTool> | undefined;
  private listedCache: Tool[] | undefined;
  private entriesCache: FederationEntry[] = [];
  private extrasCache: FederatedExtras | undefined;
  private lastSignature = '';
  private readonly lastExtrasSignature = { resources: '', prompts: '' };
  private logLevel: LoggingLevel | undefined;
  /** Agent-side resource subscriptions shared by the coordinator's sessions. */
  readonly subscriptions = new AgentSubscriptions();
  /** The log levels the coordinator's sessions asked for; agents get the most verbose one. */
  readonly logLevels = new FederatedLogLevels((level) => this.setLogLevel(level));
  private unsubscribe: (() => void) | undefined;
  private closed = false;

  constructor(private readonly options: McpFederationOptions) {
    this.bare = options.bareNames ? new BareNames() : undefined;
  }

  /** Follows the registry: agents with an MCP endpoint are listed while live. */
  start(): void {
    const offReg = this.options.registry.onChange((change) => {
      const id = change.agent.record.agent_id;
      if (change.kind === 'offline') this.drop(id);
      else void this.refresh(id);
    });
    // A card arriving after admission may carry the agent's tool alias.
    const offCard = this.options.registry.onCard((agentId) => {
      if (this.agents.has(agentId)) this.changed();
    });
    this.unsubscribe = () => {
      offReg();
      offCard();
    };
    for (const agent of this.options.registry.list())
      if (agent.status === 'live') void this.refresh(agent.record.agent_id);
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
      if (!state || agent.status !== 'live') continue;
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
    this.updateListeners.add(listener);
    return () => this.updateListeners.delete(listener);
  }

  /** Called on every log message an agent sends the coordinator. */
  onAgentLog(listener: (agentId: string, params: LoggingMessageNotification['params']) => void): () => void {
    this.logListeners.add(listener);
    return () => this.logListeners.delete(listener);
  }

  /** The wire prefix of an agent (alias or slug), for naming what it sends. */
  prefixOf(agentId: string): string {
    this.catalog();
    return this.entriesCache.find((e) => e.agentId === agentId)?.prefix ?? this.namer.slug(agentId);
  }

  /**
   * Sets the log level of every agent that offers logging (and of agents that connect later): the
   * most verbose level any caller asked for; undefined leaves agents at their default.
   */
  async setLogLevel(level: LoggingLevel | undefined): Promise<void> {
    this.logLevel = level;
    if (level === undefined) return;
    await Promise.allSettled(
      [...this.agents.entries()]
        .filter(([, s]) => s.offer.capabilities.logging !== undefined && s.client)
        .map(([, s]) => s.client!.setLoggingLevel(level)),
    );
  }

  /**
   * Runs `run` against the agent behind a resolved target with the same policy decision, auth
   * tier, audit record and pin handling as a tool call (federatedForward.ts).
   */
  forward<T>(
    kind: ForwardKind,
    wireName: string,
    target: { agentId: string; name: string } | undefined,
    argumentBytes: number,
    who: McpCaller,
    run: (client: Client) => Promise<T>,
  ): Promise<T> {
    const endpoint = target
      ? (this.agents.get(target.agentId)?.endpoint ??
        this.options.registry.get(target.agentId)?.record.mcp_endpoint ??
        '')
      : '';
    return guardedForward(
      {
        policy: this.options.policy,
        audit: this.options.audit,
        notices: this.options.notices,
        registry: this.options.registry,
        auth: this.authTier(endpoint),
        endpoint,
        clientFor: (agentId) => this.clientFor(agentId),
      },
      { kind, wireName, target, argumentBytes, who },
      run,
    );
  }

  /**
   * Handles one `tools/call`: policy, auth tier, forward, audit. Unknown names are JSON-RPC errors.
   * The agent's result (every content item: text, image, audio, resource) is returned unchanged.
   * With `onProgress`, the forwarded call carries a progress token of its own and each progress
   * notification the agent sends for it is handed to `onProgress` (for the caller's own token).
   */
  async call(
    wireName: string,
    args: Record<string, unknown>,
    who: McpCaller,
    signal?: AbortSignal,
    onProgress?: (progress: Progress) => void,
    clientFor?: (agentId: string) => Promise<Client>,
  ): Promise<CallToolResult> {
    const started = Date.now();
    const argumentBytes = Buffer.byteLength(JSON.stringify(args));
    const entry = this.catalog().get(wireName);
    const base = {
      kind: 'mcp.call' as const,
      time: new Date(started).toISOString(),
      caller: who.caller,
      session_id: who.sessionId,
      wire_name: wireName,
      argument_bytes: argumentBytes,
    };
    if (!entry) {
      void this.options.audit.append({
        ...base,
        tool: null,
        agent_id: null,
        decision: 'deny',
        reasons: ['unknown_tool'],
        outcome: 'denied',
        duration_ms: Date.now() - started,
        auth: 'none',
      });
      throw new McpError(ErrorCode.InvalidParams, `Tool ${wireName} not found`);
    }
    const agent = this.options.registry.get(entry.agentId);
    const state = this.agents.get(entry.agentId);
    const endpoint = state?.endpoint ?? agent?.record.mcp_endpoint ?? '';
    const auth = this.authTier(endpoint);
    // Not awaited: the audit log tracks the store acknowledgement (see McpAuditLog.append).
    const record = (fields: Pick<McpAuditRecord, 'decision' | 'reasons' | 'outcome'> & { error?: string }) =>
      void this.options.audit.append({
        ...base,
        tool: `${entry.agentId}/${entry.tool}`,
        agent_id: entry.agentId,
        duration_ms: Date.now() - started,
        auth,
        ...fields,
      });
    let decision;
    try {
      decision = await this.options.policy.mcp({
        caller: who.caller,
        agent_id: entry.agentId,
        tool: entry.tool,
        trust_domain: agent?.record.trust_domain ?? '',
        argument_bytes: argumentBytes,
        agent_admitted: this.options.registry.isLive(entry.agentId),
      });
    } catch (err) {
      // No decision, no call (fail closed).
      record({
        decision: 'deny',
        reasons: ['policy_unavailable'],
        outcome: 'denied',
        error: String(err),
      });
      return denied('the AMF policy could not be evaluated: call refused', ['policy_unavailable']);
    }
    if (!decision.allow) {
      record({ decision: 'deny', reasons: decision.reasons, outcome: 'denied' });
      return denied(`the AMF policy denied this call: ${decision.reasons.join(', ')}`, decision.reasons);
    }
    if (auth === 'none') {
      // Plaintext tier: warned on every call, not just once (README "MCP call authentication").
      this.options.notices.warn({
        reason: 'mcp_call_unauthenticated',
        message: `MCP call ${entry.agentId}/${entry.tool} forwarded over plaintext http:// without authentication`,
        agent_id: entry.agentId,
        details: { tool: entry.tool, mcp_endpoint: endpoint },
      });
    }
    try {
      const client = await (clientFor ?? ((id: string) => this.clientFor(id)))(entry.agentId);
      const timeout = this.options.callTimeoutMs ?? 60_000;
      // The shared client's session without the SDK's request machinery (directToolCall.ts).
      const fetch = clientFor || onProgress ? undefined : this.agents.get(entry.agentId)?.fetch;
      const direct = fetch
        ? { client, fetch, endpoint, tool: entry.tool, args, timeoutMs: timeout, signal }
        : undefined;
      const result =
        (direct && (await callToolDirect(direct))) ??
        ((await client.callTool({ name: entry.tool, arguments: args }, undefined, {
          // One total time limit: progress does not extend it (no resetTimeoutOnProgress).
          timeout,
          ...(signal ? { signal } : {}),
          ...(onProgress ? { onprogress: onProgress } : {}),
        })) as CallToolResult);
      record({ decision: 'allow', reasons: [], outcome: result.isError ? 'tool_error' : 'ok' });
      return result;
    } catch (err) {
      const mismatch = findPinMismatch(err);
      if (mismatch) {
        // Refused, not failed: the peer is not the agent that was admitted. Warned by the agent fetch.
        record({
          decision: 'deny',
          reasons: [TLS_PIN_MISMATCH_REASON],
          outcome: 'denied',
          error: mismatch.message,
        });
        throw new McpError(MCP_TLS_PIN_MISMATCH_CODE, mismatch.message, {
          reason: TLS_PIN_MISMATCH_REASON,
          agent_id: mismatch.agentId,
          pinned_sha256: mismatch.expected,
          presented_sha256: mismatch.actual,
        });
      }
      const message = err instanceof Error ? err.message : String(err);
      record({ decision: 'allow', reasons: [], outcome: 'failed', error: message.slice(0, 500) });
      return {
        content: [{ type: 'text', text: `forwarding to ${entry.agentId} failed: ${message}` }],
        isError: true,
      };
    }
  }

  /**
   * Opens a connection of its own to an agent for one caller session, with `capabilities` (sampling,
   * elicitation) the shared client does not declare: requests the agent sends on it belong to that
   * session alone. Uses the agent's fetch (pins, credentials, fingerprint); the caller closes it.
   */
  async openSessionClient(
    agentId: string,
    capabilities: ClientCapabilities,
    setup: (client: Client) => void,
  ): Promise<Client> {
    await this.clientFor(agentId);
    const state = this.agents.get(agentId);
    if (!state?.fetch) throw new Error(`agent ${agentId} has no MCP endpoint in the federation`);
    const client = new Client({ name: 'amf-coordinator', version: this.options.version }, { capabilities });
    setup(client);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(state.endpoint), { fetch: state.fetch.fetch }),
    );
    return client;
  }

  /** The federation's shared client of an agent (connects on first use). */
  sharedClient(agentId: string): Promise<Client> {
    return this.clientFor(agentId);
  }

  /** Closes every agent client. */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    const all = [...this.agents.values()];
    this.agents.clear();
    await Promise.allSettled(all.map((s) => s.client?.close()));
    for (const s of all) s.fetch?.close();
  }

  /** How calls to `endpoint` are authenticated, as the audit records it. */
  private authTier(endpoint: string): McpAuditRecord['auth'] {
    const credentials = this.options.credentials ?? NO_CALL_CREDENTIALS;
    if (credentials.kind !== NO_CALL_CREDENTIALS.kind) return 'spiffe';
    if (!isHttps(endpoint)) return 'none';
    return this.options.pins ? 'tofu' : 'tls';
  }

  private warnPinMismatch(err: TlsPinMismatchError, endpoint: string): void {
    this.options.notices.warn({
      reason: TLS_PIN_MISMATCH_REASON,
      message: err.message,
      agent_id: err.agentId,
      details: { mcp_endpoint: endpoint, pinned_sha256: err.expected, presented_sha256: err.actual },
    });
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

  private async clientFor(agentId: string): Promise<Client> {
    const state = this.agents.get(agentId);
    if (!state) throw new Error(`agent ${agentId} has no MCP endpoint in the federation`);
    if (state.client) return state.client;
    state.connecting ??= this.connect(agentId, state).catch((err: unknown) => {
      state.connecting = undefined;
      throw err;
    });
    return state.connecting;
  }

  private async connect(agentId: string, state: AgentTools): Promise<Client> {
    const pins = this.options.pins;
    if (pins && isHttps(state.endpoint))
      state.pin ??= await pins.pinOnFirstUse(agentId, state.endpoint, (sha256) =>
        this.options.log?.('info', 'TLS certificate of an MCP agent pinned (TOFU)', {
          agent: agentId,
          sha256,
        }),
      );
    state.fetch?.close();
    const agentFetch = createAgentFetch({
      agentId,
      endpoint: state.endpoint,
      credentials: this.options.credentials ?? NO_CALL_CREDENTIALS,
      ...(this.options.coordinatorFingerprint
        ? { coordinatorFingerprint: this.options.coordinatorFingerprint }
        : {}),
      ...(state.pin ? { pin: state.pin } : {}),
      onPinMismatch: (err) => this.warnPinMismatch(err, state.endpoint),
    });
    state.fetch = agentFetch;
    const client = new Client({ name: 'amf-coordinator', version: this.options.version });
    // The agent may change its tools, resources or prompts; re-list them when it says so.
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void this.refresh(agentId));
    client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void this.refresh(agentId));
    client.setNotificationHandler(PromptListChangedNotificationSchema, () => void this.refresh(agentId));
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      for (const l of this.updateListeners) l(agentId, n.params.uri);
    });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      for (const l of this.logListeners) l(agentId, n.params);
    });
    const transport = new StreamableHTTPClientTransport(new URL(state.endpoint), { fetch: agentFetch.fetch });
    await client.connect(transport);
    if (this.agents.get(agentId) !== state || this.closed) {
      await client.close();
      throw new Error(`agent ${agentId} left while connecting`);
    }
    state.client = client;
    client.onclose = () => {
      if (state.client === client) state.client = undefined;
      state.connecting = undefined;
    };
    return client;
  }

  /** (Re)lists the tools of an agent; agents without an MCP endpoint or not live are dropped. */
  private async refresh(agentId: string): Promise<void> {
    if (this.closed) return;
    const agent = this.options.registry.get(agentId);
    const endpoint = agent?.record.mcp_endpoint;
    if (!agent || agent.status !== 'live' || !endpoint) {
      this.drop(agentId);
      return;
    }
    let state = this.agents.get(agentId);
    if (state && state.endpoint !== endpoint) {
      this.drop(agentId);
      state = undefined;
    }
    if (!state) {
      state = { endpoint, tools: [], offer: EMPTY_CATALOG, generation: 0 };
      this.agents.set(agentId, state);
    }
    const generation = ++state.generation;
    try {
      const client = await this.clientFor(agentId);
      const offer = await listAgentCatalog(client);
      const tools = offer.tools;
      if (this.agents.get(agentId) !== state || state.generation !== generation) return;
      state.tools = tools;
      state.offer = offer;
      if (this.logLevel && offer.capabilities.logging)
        void client.setLoggingLevel(this.logLevel).catch(() => undefined);
      this.verifiedTools.delete(agentId);
      this.verifiedTools.set(agentId, tools);
      if (this.verifiedTools.size > 10_000)
        this.verifiedTools.delete(this.verifiedTools.keys().next().value!);
      this.changed();
    } catch (err) {
      const known = this.verifiedTools.get(agentId);
      if (findPinMismatch(err) && known && this.agents.get(agentId) === state) {
        state.tools = known;
        this.changed();
      }
      this.options.log?.('warn', 'could not list the MCP tools of an agent', {
        agent: agentId,
        err: err instanceof Error ? err.message : String(err),
      });
    }
  }

  private drop(agentId: string): void {
    const state = this.agents.get(agentId);
    if (!state) return;
    this.agents.delete(agentId);
    void state.client
      ?.close()
      .catch(() => undefined)
      .finally(() => state.fetch?.close());
    if (!state.client) state.fetch?.close();
    this.changed();
  }
}
