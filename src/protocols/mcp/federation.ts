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
  McpError,
  ToolListChangedNotificationSchema,
  type CallToolResult,
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
import type { LogFn } from '../../log.js';

export type { McpCallCredentials } from './callAuth.js';
export type { FederatedTool } from './toolNames.js';

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
}

interface AgentTools {
  endpoint: string;
  client?: Client;
  connecting?: Promise<Client>;
  tools: Tool[];
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
  private catalogCache: Map<string, FederatedTool> | undefined;
  private lastSignature = '';
  private unsubscribe: (() => void) | undefined;
  private closed = false;

  constructor(private readonly options: McpFederationOptions) {}

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
    const entries: Array<{ agentId: string; alias?: string | undefined; tools: Tool[] }> = [];
    for (const agent of this.options.registry.list()) {
      const id = agent.record.agent_id;
      const state = this.agents.get(id);
      if (!state || agent.status !== 'live' || state.tools.length === 0) continue;
      entries.push({ agentId: id, alias: toolAlias(agent), tools: state.tools });
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
    this.catalogCache = catalog;
    return catalog;
  }

  /** Tool definitions for `tools/list`. */
  listTools(): Tool[] {
    return [...this.catalog().values()].map((t) => t.definition);
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
      const client = await this.clientFor(entry.agentId);
      const result = (await client.callTool({ name: entry.tool, arguments: args }, undefined, {
        // One total time limit: progress does not extend it (no resetTimeoutOnProgress).
        timeout: this.options.callTimeoutMs ?? 60_000,
        ...(signal ? { signal } : {}),
        ...(onProgress ? { onprogress: onProgress } : {}),
      })) as CallToolResult;
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
    // The agent may change its tools; re-list them when it says so.
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void this.refresh(agentId));
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
      state = { endpoint, tools: [], generation: 0 };
      this.agents.set(agentId, state);
    }
    const generation = ++state.generation;
    try {
      const client = await this.clientFor(agentId);
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined);
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor && tools.length < 1000);
      if (this.agents.get(agentId) !== state || state.generation !== generation) return;
      state.tools = tools;
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
