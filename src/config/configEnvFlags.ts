/**
 * The environment and flag layers of the configuration: which `AMF_*` variable and which flag sets
 * which key, their string values coerced to the schema's types, and problems labelled with the
 * variable or flag the user has to change.
 */
import { CONFIG_SCHEMA } from './configSchema.js';
import { formatPath, type Problem } from './configProblems.js';
import { coerce, setIn, stripUndefined, toSnake, type Json, type JsonObject } from './configValues.js';
import type { ConfigOverrides } from './configTypes.js';

/** Environment variables read by `loadConfig`, and the `amf.yaml` key each one sets. */
export const ENV_VARIABLES: Readonly<Record<string, string>> = Object.freeze({
  AMF_DATA_DIR: 'data_dir',
  AMF_LOG_LEVEL: 'log_level',
  AMF_PORT: 'coordinator.port',
  AMF_API_KEY: 'coordinator.api_key',
  AMF_COORDINATOR_URL: 'coordinator.url',
  AMF_NATS_URL: 'nats.url',
  // The spawned server's binary: read here so it reaches `amf up` (the default fills the key, so
  // fabric/natsServer/supervisor.ts's own fallback to this variable never applied there).
  AMF_NATS_SERVER_BIN: 'nats.server_binary',
  AMF_NATS_AUTH_CALLOUT: 'nats.auth_callout',
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

/** The `AMF_*` variables as a layer, and which variable set each key. */
export function fromEnv(env: NodeJS.ProcessEnv): { data: JsonObject; sources: Map<string, string> } {
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

/** The CLI flags as a layer. */
export function fromFlags(flags: ConfigOverrides | undefined): JsonObject {
  if (!flags) return {};
  const snake = toSnake(stripUndefined(flags) as Json);
  return coerce(snake, CONFIG_SCHEMA) as JsonObject;
}

/** Labels a problem of the environment layer with the variable that caused it. */
export const envLabel =
  (sources: Map<string, string>) =>
  (p: Problem): string => {
    const key = p.path.filter((s): s is string => typeof s === 'string').join('.');
    const name = sources.get(key);
    return name ? `${name}: ${p.message}` : `environment: ${formatPath(p.path)}: ${p.message}`;
  };

/** Labels a problem of the flag layer with the flag the user typed. */
export function flagLabel(p: Problem): string {
  const flag = FLAG_NAMES[p.path.join('.')];
  return flag ? `${flag}: ${p.message}` : `option ${formatPath(p.path)}: ${p.message}`;
}
