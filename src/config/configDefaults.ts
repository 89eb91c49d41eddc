/** AMF's built-in configuration defaults, and the defaults filled into each configured MCP server. */
import { homedir } from 'node:os';
import path from 'node:path';
import { deepFreeze, isObject, type JsonObject } from './configValues.js';
import type { AmfConfig } from './configTypes.js';

const DEFAULT_MCP_TIMEOUT_SECONDS = 30;

// Kept unexpanded so loadConfig expands it against the HOME of the environment it was given.
export const DEFAULT_DATA_DIR = '~/.amf';

/** The built-in defaults: what `loadConfig()` returns when there is no file, env or flag. */
export const DEFAULT_CONFIG: AmfConfig = deepFreeze({
  dataDir: path.join(homedir(), '.amf'),
  logLevel: 'info',
  coordinator: { host: '127.0.0.1', port: 8765, apiKey: null, url: 'http://127.0.0.1:8765' },
  nats: {
    url: null,
    port: 4222,
    serverBinary: 'nats-server',
    maxPayloadBytes: 1048576,
    replicas: 1,
    storeMaxBytes: null,
    authCallout: null,
    authCalloutTtlSeconds: 300,
    serverLogs: [],
  },
  mdns: { enabled: true, interface: null },
  policy: { opaUrl: null, path: null },
  identity: { mode: null, trustDomain: 'local', legacyUnsignedAgents: false },
  tasks: {
    ttlSeconds: 30,
    maxRetries: 0,
    retryDelaySeconds: 1,
    watchdogGraceFactor: 2,
    workerLossRetries: 2,
    retainedTerminalTasks: 1000,
    maxTaskBytes: 262144,
  },
  heartbeat: { intervalSeconds: 5, offlineAfterMissed: 3 },
  openai: { requestTimeoutSeconds: 60, maxBodyBytes: 1048576 },
  http: {
    rateLimitPerSecond: 1000,
    rateLimitBurst: 2000,
    maxBodyBytes: 1048576,
    requestTimeoutSeconds: 60,
    ampMaxJobs: 1000,
    allowPrivateCallbacks: false,
    headersTimeoutSeconds: 10,
    bodyTimeoutSeconds: 30,
    sseMaxClients: 256,
    sseMaxBufferedBytes: 1048576,
  },
  worker: {
    name: null,
    tags: [],
    port: 8766,
    host: '127.0.0.1',
    trust: 'local',
    handler: 'echo',
    concurrency: 16,
    handlerTimeoutSeconds: 600,
    handlerTimeouts: [],
  },
  mcp: {
    requireTls: false,
    servers: [],
    sessionIdleSeconds: 600,
    maxSessions: 1000,
    maxSessionsPerClient: 32,
    bareNames: false,
    reexportServers: false,
  },
  a2a: { agents: [], taskStoreSize: 1000, inputTtlSeconds: 86400, defaultAgent: null },
  watcher: { integrityWarn: true },
  history: { maxAgeSeconds: 86400, maxBytes: 536870912, maxMessages: 1000000 },
  artifacts: {
    maxAgeSeconds: 86400,
    maxBytes: 268435456,
    maxMessages: 100000,
    maxEventBytes: 262144,
    agentBytesPerMinute: 8388608,
    agentEventsPerMinute: 120,
  },
  // Far above one busy agent (the benchmark's c=64 load is a few thousand events a second).
  taskEvents: { maxEventBytes: 8388608, agentBytesPerMinute: 4294967296, agentEventsPerMinute: 3000000 },
});

/**
 * Loads, validates and merges the configuration. Throws `ConfigError` listing every problem found

/** Fills each MCP server's optional fields, so callers see one complete shape per transport. */
export function withServerDefaults(config: JsonObject): JsonObject {
  const mcp = config.mcp as JsonObject;
  mcp.servers = (mcp.servers as JsonObject[]).map((s) => {
    const tools = isObject(s.tools) ? s.tools : {};
    const common: JsonObject = {
      name: s.name!,
      transport: s.transport!,
      timeout_seconds: s.timeout_seconds ?? DEFAULT_MCP_TIMEOUT_SECONDS,
      tools: { allow: tools.allow ?? null, deny: tools.deny ?? [] },
    };
    return s.transport === 'http'
      ? { ...common, url: s.url! }
      : { ...common, command: s.command!, args: s.args ?? [], env: s.env ?? [] };
  });
  return config;
}
