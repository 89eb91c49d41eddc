/** The shape of the validated AMF configuration (the camelCase view of `amf.yaml`) and of overrides. */

/** Log levels, in pino's vocabulary (the logger the project uses). */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent';

/** Tool filter of one MCP server: `allow: null` means every tool the server lists is allowed. */
export interface McpToolFilter {
  readonly allow: readonly string[] | null;
  readonly deny: readonly string[];
}

/** Fields every configured MCP server has, whatever its transport. */
export interface McpServerBase {
  readonly name: string;
  readonly timeoutSeconds: number;
  readonly tools: McpToolFilter;
}

/** An MCP server reached over Streamable HTTP. */
export interface McpHttpServerConfig extends McpServerBase {
  readonly transport: 'http';
  readonly url: string;
}

/** An MCP server started as a child process speaking stdio; `env` names variables passed through. */
export interface McpStdioServerConfig extends McpServerBase {
  readonly transport: 'stdio';
  readonly command: string;
  readonly args: readonly string[];
  readonly env: readonly string[];
}

/** One configured MCP server (discriminated by `transport`). */
export type McpServerConfig = McpHttpServerConfig | McpStdioServerConfig;

/** A remote A2A agent the coordinator knows by configuration rather than by discovery. */
export interface A2aAgentConfig {
  readonly name: string;
  readonly url: string;
}

/** The complete, validated AMF configuration (camelCase view of `amf.yaml`). */
export interface AmfConfig {
  /** Absolute path (`~` expanded). */
  readonly dataDir: string;
  readonly logLevel: LogLevel;
  readonly coordinator: {
    readonly host: string;
    readonly port: number;
    readonly apiKey: string | null;
    /** Where clients and workers find the coordinator; derived from host and port unless set. */
    readonly url: string;
  };
  readonly nats: {
    /** External NATS server(s); null = AMF spawns `serverBinary` on `port`. */
    readonly url: string | null;
    readonly port: number;
    readonly serverBinary: string;
    readonly maxPayloadBytes: number;
    /**
     * Copies of every stream and KV bucket AMF creates: 1 on a single server, 3 on a NATS cluster so
     * the mesh state survives the loss of a node (JetStream needs a majority of the copies up).
     */
    readonly replicas: number;
    /**
     * What the streams and buckets may reserve in all; null = at most half the data dir's free
     * space, and never more than their default sizes (jetstream.ts).
     */
    readonly storeMaxBytes: number | null;
    /**
     * Answer NATS auth callout with per-agent users on an external NATS (docs/security.md): true =
     * on (the issuer key is created if missing), false = off, null = on when `callout.nkey` exists.
     */
    readonly authCallout: boolean | null;
    /** Lifetime of each user JWT the callout issues: a revoked agent is cut after at most this. */
    readonly authCalloutTtlSeconds: number;
    /**
     * Log files of an external nats-server on this machine (`scripts/cluster.sh` prints them): the
     * coordinator follows them and warns about the permission refusals they log, as it does for
     * the server it spawns. Empty: none.
     */
    readonly serverLogs: readonly string[];
  };
  readonly mdns: { readonly enabled: boolean; readonly interface: string | null };
  readonly policy: { readonly opaUrl: string | null; readonly path: string | null };
  readonly identity: {
    readonly mode: 'static' | 'spiffe' | null;
    readonly trustDomain: string;
    /**
     * Seed compatibility (docs/security.md): accept unsigned task events from agents admitted
     * without a key. Off by default: such events could come from anyone with a fabric credential.
     */
    readonly legacyUnsignedAgents: boolean;
  };
  readonly tasks: {
    readonly ttlSeconds: number;
    readonly maxRetries: number;
    readonly retryDelaySeconds: number;
    readonly watchdogGraceFactor: number;
    /** Re-announcements of a task whose worker was lost (offline or silent), besides max_retries. */
    readonly workerLossRetries: number;
    readonly retainedTerminalTasks: number;
    readonly maxTaskBytes: number;
  };
  readonly heartbeat: { readonly intervalSeconds: number; readonly offlineAfterMissed: number };
  readonly openai: { readonly requestTimeoutSeconds: number; readonly maxBodyBytes: number };
  /** Guards of the coordinator's HTTP edge and the AMP/Fabric endpoints (see src/http/httpGuards.ts). */
  readonly http: {
    /** GCRA rate per client address; 0 turns rate limiting off. */
    readonly rateLimitPerSecond: number;
    readonly rateLimitBurst: number;
    /** Largest request body on routes without a limit of their own (AMP, Fabric, A2A, MCP). */
    readonly maxBodyBytes: number;
    /** How long AMP and Fabric wait for a mesh result when the request sets no shorter bound. */
    readonly requestTimeoutSeconds: number;
    /** Deferred AMP jobs kept for polling (oldest finished ones are evicted first). */
    readonly ampMaxJobs: number;
    /** Let AMP `reply_to` reach loopback/private addresses even when the coordinator listens beyond loopback. */
    readonly allowPrivateCallbacks: boolean;
    /** A request's headers must arrive within this (coordinator and worker servers). */
    readonly headersTimeoutSeconds: number;
    /** The whole request, headers and body, must arrive within this, else 408 and the connection is closed. */
    readonly bodyTimeoutSeconds: number;
    /** Concurrent `GET /events` streams; one more gets 503 with Retry-After. */
    readonly sseMaxClients: number;
    /** Bytes an SSE client may have waiting unsent; past this it is disconnected (total ≤ clients × this). */
    readonly sseMaxBufferedBytes: number;
  };
  readonly worker: {
    readonly name: string | null;
    readonly tags: readonly string[];
    readonly port: number;
    readonly host: string;
    readonly trust: string;
    /** `echo` (built in) or an absolute path to a handler module. */
    readonly handler: string;
    readonly concurrency: number;
    /**
     * How long a handler may run before its attempt is ended (its signal aborted, the task retried
     * on another worker); a tag listed in `handlerTimeouts` has its own.
     */
    readonly handlerTimeoutSeconds: number;
    readonly handlerTimeouts: readonly { readonly tag: string; readonly seconds: number }[];
  };
  readonly mcp: {
    readonly requireTls: boolean;
    readonly servers: readonly McpServerConfig[];
    /** An MCP session (coordinator and worker `/mcp`) unused this long is closed. */
    readonly sessionIdleSeconds: number;
    /** Sessions open at once on one `/mcp`, all clients together; more are refused (503). */
    readonly maxSessions: number;
    /** Sessions one client address may hold on one `/mcp`; beyond, its LRU idle one is closed (429 when all are busy). */
    readonly maxSessionsPerClient: number;
    /**
     * The coordinator's `/mcp` also lists a federated tool, prompt or resource under its agent's own
     * name when no other agent claims that name (first come, first served; docs/mcp.md).
     */
    readonly bareNames: boolean;
    /** `amf worker` also serves `servers`' tools, resources and prompts on its `/mcp` (docs/mcp.md). */
    readonly reexportServers: boolean;
  };
  readonly a2a: {
    readonly agents: readonly A2aAgentConfig[];
    /** A2A tasks kept by the coordinator's task store (oldest terminal ones are evicted first). */
    readonly taskStoreSize: number;
    /**
     * How long a task through the coordinator waits in input-required for the requester's next
     * message (a person may take hours); the mesh's own result timeout counts only while it works.
     */
    readonly inputTtlSeconds: number;
    /**
     * Where a message with no tag, intent or matching skill goes: a capability tag, or an agent
     * (its name or id; its first live tag). null = such a message is refused with the skills listed.
     */
    readonly defaultAgent: string | null;
  };
  readonly watcher: { readonly integrityWarn: boolean };
  /**
   * The event history (stream AMF_EVENTS: task events, results, warnings; docs/reliability.md). The
   * coordinators' other streams derive their bounds from it.
   */
  readonly history: {
    readonly maxAgeSeconds: number;
    readonly maxBytes: number;
    readonly maxMessages: number;
  };
  /**
   * Artifact and evidence events: their own stream (AMF_ARTIFACTS), so they never push results or
   * warnings out of the history, and each agent's quota, enforced by the coordinator that checks and
   * publishes what the agent hands it (coordinator/artifactIntake.ts, docs/security.md).
   */
  readonly artifacts: {
    readonly maxAgeSeconds: number;
    readonly maxBytes: number;
    readonly maxMessages: number;
    /** The largest artifact or evidence event stored (and accepted from an agent). */
    readonly maxEventBytes: number;
    /** Bytes of artifacts and evidence one agent may hand in per minute (burst: one minute's worth). */
    readonly agentBytesPerMinute: number;
    /** Artifact and evidence events one agent may hand in per minute (burst: one minute's worth). */
    readonly agentEventsPerMinute: number;
  };
  /**
   * An agent's task events (claims, progress, blocked, delegations, partials, direct finals) and
   * stored results: handed to the coordinators on subjects named after its key, and recorded within
   * these bounds (coordinator/tasks/eventIntake.ts, docs/security.md "Private and bounded").
   */
  readonly taskEvents: {
    /** The largest task event or stored result taken from an agent. */
    readonly maxEventBytes: number;
    /** Bytes of task events and stored results one agent may send per minute (burst: a minute's worth). */
    readonly agentBytesPerMinute: number;
    /** Task events and stored results one agent may send per minute (burst: a minute's worth). */
    readonly agentEventsPerMinute: number;
  };
}

// Flags arrive from an argument parser as strings, so numeric, boolean and list leaves also accept
// a string; it is coerced ("8765" -> 8765, "a,b" -> ["a","b"]) and validated like an env value.
type Override<T> = T extends readonly (infer U)[]
  ? U extends string
    ? readonly string[] | string
    : readonly Override<U>[]
  : T extends number
    ? number | string
    : T extends boolean
      ? boolean | string
      : T extends object
        ? { readonly [K in keyof T]?: Override<T[K]> | undefined }
        : T;

/** A deep-partial `AmfConfig` (camelCase) as CLI flags set it; `undefined` leaves are ignored. */
export type ConfigOverrides = Override<AmfConfig>;
