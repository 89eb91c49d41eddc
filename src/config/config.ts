/**
 * AMF configuration: one YAML file (`amf.yaml`) for everything a flag sets, overlaid in the order
 * built-in defaults < file < environment < CLI flags.
 *
 * Each layer is validated on its own against the same JSON schema before merging, so a problem is
 * reported against the place the user has to edit (`amf.yaml: coordinator.port ...` with line and
 * column, `AMF_PORT: ...`, `--port: ...`), never against an anonymous merged object. The result is
 * a deeply frozen camelCase object: configuration is read once at start-up and must not drift.
 * Validation messages live in configProblems.ts, value coercion and paths in configValues.ts; the
 * layers in configFile.ts and configEnvFlags.ts, the defaults in configDefaults.ts.
 */
import { homedir } from 'node:os';
import path from 'node:path';
import { checkLayer, formatPath } from './configProblems.js';
import {
  deepFreeze,
  deepMerge,
  deriveUrl,
  expandPath,
  isObject,
  resolvePaths,
  toCamel,
  toSnake,
  type Json,
  type JsonObject,
} from './configValues.js';
import { DEFAULT_CONFIG, DEFAULT_DATA_DIR, withServerDefaults } from './configDefaults.js';
import { envLabel, flagLabel, fromEnv, fromFlags } from './configEnvFlags.js';
import { readConfigFile } from './configFile.js';
import type { AmfConfig, ConfigOverrides } from './configTypes.js';
import { AmfError } from '../errors.js';

export type {
  A2aAgentConfig,
  AmfConfig,
  ConfigOverrides,
  LogLevel,
  McpHttpServerConfig,
  McpServerBase,
  McpServerConfig,
  McpStdioServerConfig,
  McpToolFilter,
} from './configTypes.js';
export { DEFAULT_CONFIG } from './configDefaults.js';

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

/** The name of the configuration file looked up in the data directory. */
export const CONFIG_FILE_NAME = 'amf.yaml';

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
