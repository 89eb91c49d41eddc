/**
 * The federation's links to its agents: one SDK Client per agent that announces an MCP endpoint,
 * reused across calls and closed when the agent leaves, and what each agent last listed (tools,
 * resources, prompts, capabilities). Agents on `https://` are TOFU-pinned on first connection
 * (tlsPins.ts); see callAuth.ts for the authentication tiers.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  LoggingMessageNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type ClientCapabilities,
  type LoggingLevel,
  type LoggingMessageNotification,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { AgentRegistry } from '../../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../../registry/policyNotices.js';
import {
  createAgentFetch,
  isHttps,
  NO_CALL_CREDENTIALS,
  type AgentFetch,
  type McpCallCredentials,
} from './callAuth.js';
import type { McpAuditRecord } from './audit.js';
import {
  findPinMismatch,
  TLS_PIN_MISMATCH_REASON,
  type TlsPinMismatchError,
  type TlsPinStore,
} from './tlsPins.js';
import { EMPTY_CATALOG, listAgentCatalog, type AgentCatalog } from './agentCatalog.js';
import type { LogFn } from '../../../log.js';
import { AmfError } from '../../../errors.js';

/** What the agent links need from the federation's options. */
export interface FederatedAgentsOptions {
  registry: AgentRegistry;
  notices: PolicyNotices;
  version: string;
  credentials?: McpCallCredentials;
  pins?: TlsPinStore;
  coordinatorFingerprint?: string;
  log?: LogFn;
}

/** One agent's link and what it last listed. */
export interface AgentTools {
  endpoint: string;
  client?: Client | undefined;
  connecting?: Promise<Client> | undefined;
  tools: Tool[];
  /** Everything else the agent offers (resources, templates, prompts, capabilities). */
  offer: AgentCatalog;
  /** Pinned certificate fingerprint (https endpoints under TOFU). */
  pin?: string;
  fetch?: AgentFetch;
  /** Bumped on every refresh so a slow stale listing cannot overwrite a newer one. */
  generation: number;
}

/** The agents of the federation and their clients. */
export class FederatedAgents {
  private readonly agents = new Map<string, AgentTools>();
  /**
   * Last tools each agent listed over a verified connection, kept after it leaves: an agent that
   * comes back with a different certificate keeps its tools listed, so calling them gives a clear
   * pin-mismatch refusal instead of "tool not found". Bounded; oldest forgotten first.
   */
  private readonly verifiedTools = new Map<string, Tool[]>();
  private readonly updateListeners = new Set<(agentId: string, uri: string) => void>();
  private readonly logListeners = new Set<
    (agentId: string, params: LoggingMessageNotification['params']) => void
  >();
  private logLevel: LoggingLevel | undefined;
  private closed = false;

  /** `changed` is called whenever what an agent offers (or whether it is listed) changed. */
  constructor(
    private readonly options: FederatedAgentsOptions,
    private readonly changed: () => void,
  ) {}

  /** The link of an agent, if it is in the federation. */
  get(agentId: string): AgentTools | undefined {
    return this.agents.get(agentId);
  }

  has(agentId: string): boolean {
    return this.agents.has(agentId);
  }

  /** The MCP endpoint of an agent: the linked one, else the one its record announces. */
  endpointOf(agentId: string): string {
    return (
      this.agents.get(agentId)?.endpoint ?? this.options.registry.get(agentId)?.record.mcp_endpoint ?? ''
    );
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
    if (!state?.fetch)
      throw new AmfError('NOT_FOUND', `agent ${agentId} has no MCP endpoint in the federation`);
    const client = new Client({ name: 'amf-coordinator', version: this.options.version }, { capabilities });
    setup(client);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(state.endpoint), { fetch: state.fetch.fetch }),
    );
    return client;
  }

  /** Closes every agent client. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.agents.values()];
    this.agents.clear();
    await Promise.allSettled(all.map((s) => s.client?.close()));
    for (const s of all) s.fetch?.close();
  }

  /** How calls to `endpoint` are authenticated, as the audit records it. */
  authTier(endpoint: string): McpAuditRecord['auth'] {
    const credentials = this.options.credentials ?? NO_CALL_CREDENTIALS;
    if (credentials.kind === 'spiffe') return 'spiffe';
    if (isHttps(endpoint)) return this.options.pins ? 'tofu' : 'tls';
    return credentials.kind === 'coordinator' ? 'bearer' : 'none';
  }

  private warnPinMismatch(err: TlsPinMismatchError, endpoint: string): void {
    this.options.notices.warn({
      reason: TLS_PIN_MISMATCH_REASON,
      message: err.message,
      agent_id: err.agentId,
      details: { mcp_endpoint: endpoint, pinned_sha256: err.expected, presented_sha256: err.actual },
    });
  }

  /** The shared client of an agent (connects on first use). */
  async clientFor(agentId: string): Promise<Client> {
    const state = this.agents.get(agentId);
    if (!state) throw new AmfError('NOT_FOUND', `agent ${agentId} has no MCP endpoint in the federation`);
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
      throw new AmfError('UNAVAILABLE', `agent ${agentId} left while connecting`);
    }
    state.client = client;
    client.onclose = () => {
      if (state.client === client) state.client = undefined;
      state.connecting = undefined;
    };
    return client;
  }

  /** (Re)lists the tools of an agent; agents without an MCP endpoint or not live are dropped. */
  async refresh(agentId: string): Promise<void> {
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

  /** Forgets an agent and closes its client. */
  drop(agentId: string): void {
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
