/**
 * AMF configuration: one YAML file (`amf.yaml`) for everything a flag sets, overlaid in the order
 * built-in defaults < file < environment < CLI flags.
 *
 * Each layer is validated on its own against the same JSON schema before merging, so a problem is
 * reported against the place the user has to edit (`amf.yaml: coordinator.port ...` with line and
 * column, `AMF_PORT: ...`, `--port: ...`), never against an anonymous merged object. The result is
 * a deeply frozen camelCase object: configuration is read once at start-up and must not drift.
 * Validation messages live in configProblems.ts, value coercion and paths in configValues.ts.
 */
import { readFile, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { CONFIG_SCHEMA } from './configSchema.js';
import { checkLayer, findProblems, formatPath, type Problem } from './configProblems.js';
import {
  coerce,
  deepFreeze,
  deepMerge,
  deriveUrl,
  expandPath,
  isObject,
  resolvePaths,
  setIn,
  stripUndefined,
  toCamel,
  toSnake,
  type Json,
  type JsonObject,
} from './configValues.js';
import { AmfError } from '../errors.js';

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
  /** Guards of the coordinator's HTTP edge and the AMP/Fabric endpoints (see src/apps/httpGuards.ts). */
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
  };
  readonly mcp: {
    readonly requireTls: boolean;
    readonly servers: readonly McpServerConfig[];
    /** An MCP session (coordinator and worker `/mcp`) unused this long is closed. */
    readonly sessionIdleSeconds: number;
    /** Sessions open at once on one `/mcp`, all clients together; more are refused (503). */
    readonly maxSessions: number;
    /** Sessions one client address may hold on one `/mcp`; more are refused (429). */
    readonly maxSessionsPerClient: number;
    /**
     * The coordinator's `/mcp` also lists a federated tool, prompt or resource under its agent's own
     * name when no other agent claims that name (first come, first served; docs/mcp-server.md).
     */
    readonly bareNames: boolean;
    /** `amf worker` also serves `servers`' tools, resources and prompts on its `/mcp` (docs/mcp.md). */
    readonly reexportServers: boolean;
  };
  readonly a2a: {
    readonly agents: readonly A2aAgentConfig[];
    /** A2A tasks kept by the coordinator's task store (oldest terminal ones are evicted first). */
    readonly taskStoreSize: number;
  };
  readonly watcher: { readonly integrityWarn: boolean };
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

/** Where `loadConfig` reads from; every field is optional. */
export interface LoadConfigOptions {
  /** `--config PATH`: must exist. Without it, `<data-dir>/amf.yaml` is read if present. */
  configPath?: string;
  /** CLI flags, the highest-precedence layer. */
  flags?: ConfigOverrides;
  /** Environment to read `AMF_*` variables (and HOME for `~`) from; defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Thrown when any layer is invalid; `problems` has one self-contained line per problem. */
export class ConfigError extends AmfError {
  /** Stable code for callers that map errors to exit codes. */
  declare readonly code: 'CONFIG_INVALID';
  /** Each names its source and key, and says what was expected. */
  readonly problems: string[];

  constructor(problems: string[]) {
    super(
      'CONFIG_INVALID',
      (problems.length === 1 ? problems[0] : undefined) ??
        `invalid configuration:\n  ${problems.join('\n  ')}`,
    );
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Environment variables read by `loadConfig`, and the `amf.yaml` key each one sets. */
export const ENV_VARIABLES: Readonly<Record<string, string>> = Object.freeze({
  AMF_DATA_DIR: 'data_dir',
  AMF_LOG_LEVEL: 'log_level',
  AMF_PORT: 'coordinator.port',
  AMF_API_KEY: 'coordinator.api_key',
  AMF_COORDINATOR_URL: 'coordinator.url',
  AMF_NATS_URL: 'nats.url',
  AMF_MDNS_INTERFACE: 'mdns.interface',
  AMF_IDENTITY_MODE: 'identity.mode',
  AMF_LEGACY_UNSIGNED_AGENTS: 'identity.legacy_unsigned_agents',
  AMF_MCP_REQUIRE_TLS: 'mcp.require_tls',
  AMF_MCP_BARE_NAMES: 'mcp.bare_names',
  AMF_WATCHER_INTEGRITY_WARN: 'watcher.integrity_warn',
});

/** The contract's CLI flags by the key they set, so flag errors name the flag the user typed. */
export const FLAG_NAMES: Readonly<Record<string, string>> = Object.freeze({
  data_dir: '--data-dir',
  'coordinator.host': '--host',
  'coordinator.port': '--port',
  'coordinator.api_key': '--api-key',
  'coordinator.url': '--coordinator',
  'nats.url': '--nats-url',
  'nats.port': '--nats-port',
  'mdns.enabled': '--no-mdns',
  'mdns.interface': '--mdns-interface',
  'policy.opa_url': '--opa-url',
  'policy.path': '--policy',
  'worker.name': '--name',
  'worker.tags': '--tags',
  'worker.port': '--port',
  'worker.trust': '--trust',
  'worker.handler': '--handler',
});

/** The name of the configuration file looked up in the data directory. */
export const CONFIG_FILE_NAME = 'amf.yaml';

// A configuration file is small; refusing huge files bounds parse time and memory.
const MAX_CONFIG_BYTES = 1024 * 1024;
const DEFAULT_MCP_TIMEOUT_SECONDS = 30;

// Kept unexpanded so loadConfig expands it against the HOME of the environment it was given.
const DEFAULT_DATA_DIR = '~/.amf';

/** The built-in defaults: what `loadConfig()` returns when there is no file, env or flag. */
export const DEFAULT_CONFIG: AmfConfig = deepFreeze({
  dataDir: path.join(homedir(), '.amf'),
  logLevel: 'info',
  coordinator: { host: '127.0.0.1', port: 8765, apiKey: null, url: 'http://127.0.0.1:8765' },
  nats: { url: null, port: 4222, serverBinary: 'nats-server', maxPayloadBytes: 1048576, replicas: 1 },
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
  a2a: { agents: [], taskStoreSize: 1000 },
  watcher: { integrityWarn: true },
});

/**
 * Loads, validates and merges the configuration. Throws `ConfigError` listing every problem found
 * in every layer (not just the first), so one run shows everything to fix.
 */
export async function loadConfig(opts: LoadConfigOptions = {}): Promise<AmfConfig> {
  const env = opts.env ?? process.env;
  const home = env.HOME || homedir();
  const cwd = process.cwd();

  const envLayer = fromEnv(env);
  const envProblems = checkLayer(envLayer.data, envLabel(envLayer.sources));
  const flagLayer = fromFlags(opts.flags);
  const flagProblems = checkLayer(flagLayer, flagLabel);

  // The file is looked up in the data dir the flags or environment chose, not the default one.
  let filePath = opts.configPath !== undefined ? expandPath(opts.configPath, home, cwd) : undefined;
  const required = filePath !== undefined;
  if (filePath === undefined) {
    const dir = [flagLayer.data_dir, envLayer.data.data_dir].find((d) => typeof d === 'string' && d !== '');
    filePath = path.join(
      expandPath(typeof dir === 'string' ? dir : DEFAULT_DATA_DIR, home, cwd),
      CONFIG_FILE_NAME,
    );
  }
  const file = await readConfigFile(filePath, required);

  // Listed in precedence order, the order the user reads about the layers in.
  const problems = [...file.problems, ...envProblems, ...flagProblems];
  if (problems.length > 0) throw new ConfigError(problems);

  const fileDir = path.dirname(filePath);
  const layers: JsonObject[] = [
    resolvePaths(file.data, home, fileDir),
    resolvePaths(envLayer.data, home, cwd),
    resolvePaths(flagLayer, home, cwd),
  ];
  let merged = toSnake(DEFAULT_CONFIG as unknown as Json) as JsonObject;
  merged.data_dir = DEFAULT_DATA_DIR;
  for (const layer of layers) merged = deepMerge(merged, layer);
  merged.data_dir = expandPath(merged.data_dir as string, home, cwd);

  const coordinator = merged.coordinator as JsonObject;
  if (!layers.some((l) => isObject(l.coordinator) && l.coordinator.url !== undefined)) {
    coordinator.url = deriveUrl(coordinator.host as string, coordinator.port as number);
  }

  // The layers were valid, so this only guards the merge itself; a failure here is a bug.
  const final = checkLayer(merged, (p) => `configuration: ${formatPath(p.path)}: ${p.message}`);
  if (final.length > 0) throw new ConfigError(final);

  return deepFreeze(toCamel(withServerDefaults(merged)) as unknown as AmfConfig);
}

// ---------------------------------------------------------------------------------------------
// Layers

interface FileLayer {
  data: JsonObject;
  problems: string[];
}

async function readConfigFile(file: string, required: boolean): Promise<FileLayer> {
  const fail = (message: string): FileLayer => ({ data: {}, problems: [`${file}: ${message}`] });
  let text: string;
  try {
    const info = await stat(file);
    if (!info.isFile()) return fail('is not a regular file');
    if (info.size > MAX_CONFIG_BYTES) return fail(`is larger than ${MAX_CONFIG_BYTES} bytes`);
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // An absent optional file is normal; ENOTDIR (data dir is a file) is left for `amf doctor` to report.
    if ((code === 'ENOENT' || code === 'ENOTDIR') && !required) return { data: {}, problems: [] };
    return fail(`cannot read config file (${code === 'ENOENT' ? 'no such file' : (code ?? String(err))})`);
  }

  // Loaded only when there is a file: yaml is most of the modules a short command would load.
  const [{ LineCounter, parseDocument }, { locate }] = await Promise.all([
    import('yaml'),
    import('./configLocate.js'),
  ]);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, {
    version: '1.2',
    lineCounter,
    prettyErrors: false,
    uniqueKeys: true,
  });
  if (doc.errors.length > 0) {
    return {
      data: {},
      problems: doc.errors.map((e) => {
        const { line, col } = lineCounter.linePos(e.pos[0]);
        return `${file}: YAML syntax error at line ${line}, column ${col}: ${firstLine(e.message)}`;
      }),
    };
  }
  let data: unknown;
  try {
    // maxAliasCount bounds "billion laughs" expansion of anchors.
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return fail(`YAML error: ${firstLine((err as Error).message)}`);
  }
  data ??= {}; // an empty file, or one with only comments, changes nothing
  // Reported in file order, so the list reads top to bottom like the file.
  const located = findProblems(data as Json).map((p) => ({
    p,
    at: locate(doc, lineCounter, p.path, p.isKey),
  }));
  located.sort((a, b) => (a.at?.offset ?? -1) - (b.at?.offset ?? -1));
  const problems = located.map(({ p, at }) => {
    const key = p.path.length > 0 ? `${formatPath(p.path)}: ` : '';
    const where = at ? ` at line ${at.line}, column ${at.col}` : '';
    return `${file}: ${key}${p.message}${where}`;
  });
  return { data: data as JsonObject, problems };
}

function fromEnv(env: NodeJS.ProcessEnv): { data: JsonObject; sources: Map<string, string> } {
  const data: JsonObject = {};
  const sources = new Map<string, string>();
  for (const [name, key] of Object.entries(ENV_VARIABLES)) {
    const raw = env[name]?.trim();
    if (raw === undefined || raw === '') continue; // empty = unset, as shells commonly export it
    setIn(data, key.split('.'), raw);
    sources.set(key, name);
  }
  return { data: coerce(data, CONFIG_SCHEMA) as JsonObject, sources };
}

function fromFlags(flags: ConfigOverrides | undefined): JsonObject {
  if (!flags) return {};
  const snake = toSnake(stripUndefined(flags) as Json);
  return coerce(snake, CONFIG_SCHEMA) as JsonObject;
}

const envLabel =
  (sources: Map<string, string>) =>
  (p: Problem): string => {
    const key = p.path.filter((s): s is string => typeof s === 'string').join('.');
    const name = sources.get(key);
    return name ? `${name}: ${p.message}` : `environment: ${formatPath(p.path)}: ${p.message}`;
  };

function flagLabel(p: Problem): string {
  const flag = FLAG_NAMES[p.path.join('.')];
  return flag ? `${flag}: ${p.message}` : `option ${formatPath(p.path)}: ${p.message}`;
}

// Fills each MCP server's optional fields, so callers see one complete shape per transport.
function withServerDefaults(config: JsonObject): JsonObject {
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

function firstLine(text: string): string {
  return text.split('\n')[0] ?? text;
}
