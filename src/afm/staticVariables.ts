/**
 * Static variable substitution (AFM 7): `${env:NAME}`, `${file:PATH}` / `${file:PATH#key.path}` and
 * `${secret:NAME}`, resolved once when the agent loads. Substitution runs on parsed YAML string values
 * (never on the raw text), so a variable's value can never change the structure of the front matter.
 * `$${` writes a literal `${`. Where each form may appear is decided by the caller's `context`.
 */
import { lstatSync, readFileSync, realpathSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { AmfError } from '../errors.js';

/** The most a `file:` or `secret:` value may hold. */
export const MAX_VARIABLE_FILE_BYTES = 64 * 1024;

/** One `${…}` reference in a text. */
export interface VariableRef {
  /** Offset of `${` in the text. */
  readonly offset: number;
  /** The reference as written, e.g. `${env:TOKEN}`. */
  readonly source: string;
  /** `env`, `file`, `secret`, `http`, another prefix, or `''` when there is none. */
  readonly prefix: string;
  readonly name: string;
}

/**
 * Where a text comes from: a front-matter value, the webhook prompt (http variables stay for the
 * template), the template of a served MCP prompt (`arg:` variables stay), or the markdown body (unprefixed `${X}` and unknown prefixes stay literal there, since
 * instructions often show shell snippets).
 */
export type VariableContext = 'value' | 'prompt' | 'mcpPrompt' | 'body';

/** Where static values come from. */
export interface StaticSources {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Directory of the AFM file (`file:` paths are relative to it and must stay inside it). */
  readonly baseDir: string;
  /** AMF data directory (`secret:` files live in `<dataDir>/secrets/`). */
  readonly dataDir: string;
}

/** A problem with one reference, at `offset` in the text. */
export interface VariableProblem {
  readonly severity: 'error' | 'note';
  readonly offset: number;
  readonly source: string;
  readonly message: string;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/** Finds every `${…}` reference (an unterminated `${` is text). */
export function scanVariables(text: string): VariableRef[] {
  const refs: VariableRef[] = [];
  let i = 0;
  while ((i = text.indexOf('${', i)) >= 0) {
    if (i > 0 && text[i - 1] === '$') {
      i += 2;
      continue;
    }
    const close = text.indexOf('}', i + 2);
    if (close < 0) break;
    const expr = text.slice(i + 2, close);
    const m = /^([A-Za-z][A-Za-z0-9_-]*):([\s\S]*)$/.exec(expr);
    refs.push({
      offset: i,
      source: text.slice(i, close + 1),
      prefix: m?.[1] ?? '',
      name: (m ? m[2] : expr) ?? '',
    });
    i = close + 1;
  }
  return refs;
}

/** `AMF_SECRET_<NAME>`: upper case, `.` and `-` as `_`. */
export function secretEnvName(name: string): string {
  return `AMF_SECRET_${name.toUpperCase().replace(/[.-]/g, '_')}`;
}

function readBounded(file: string, what: string): string {
  const size = statSync(file).size;
  if (size > MAX_VARIABLE_FILE_BYTES)
    throw new AmfError(
      'INVALID_REQUEST',
      `${what} is ${size} bytes; the limit is ${MAX_VARIABLE_FILE_BYTES}`,
    );
  return readFileSync(file, 'utf8').replace(/\r?\n$/, '');
}

function resolveFile(spec: string, sources: StaticSources): string {
  const hash = spec.indexOf('#');
  const rel = (hash < 0 ? spec : spec.slice(0, hash)).trim();
  const key = hash < 0 ? undefined : spec.slice(hash + 1).trim();
  if (!rel) throw new AmfError('INVALID_REQUEST', 'expected ${file:PATH} or ${file:PATH#key.path}');
  if (path.isAbsolute(rel))
    throw new AmfError('INVALID_REQUEST', `file path '${rel}' must be relative to the AFM file's directory`);
  const base = realpathSync(sources.baseDir);
  let target: string;
  try {
    target = realpathSync(path.resolve(base, rel));
  } catch {
    throw new AmfError('INVALID_REQUEST', `file '${rel}' not found next to the AFM file (${base})`);
  }
  // Symlinks and `..` must not lead outside the agent's directory (a shared AFM file must not be able
  // to read, say, ~/.ssh into a model URL).
  if (target !== base && !target.startsWith(base + path.sep)) {
    throw new AmfError('INVALID_REQUEST', `file '${rel}' is outside the AFM file's directory`);
  }
  const text = readBounded(target, `file '${rel}'`);
  if (key === undefined) return text;
  if (!/\.(json|ya?ml)$/i.test(target))
    throw new AmfError('INVALID_REQUEST', `file '${rel}': a #key needs a .json, .yaml or .yml file`);
  let data: unknown;
  try {
    data = /\.json$/i.test(target) ? JSON.parse(text) : parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new AmfError('INVALID_REQUEST', `file '${rel}' does not parse: ${(err as Error).message}`);
  }
  let current = data;
  for (const part of key.split('.')) {
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, part)) {
      throw new AmfError('INVALID_REQUEST', `key '${key}' not found in file '${rel}'`);
    }
    current = (current as Record<string, unknown>)[part];
  }
  if (typeof current === 'string' || typeof current === 'number' || typeof current === 'boolean')
    return String(current);
  throw new AmfError('INVALID_REQUEST', `key '${key}' in file '${rel}' is not a string, number or boolean`);
}

function resolveSecret(name: string, sources: StaticSources): string {
  if (!SECRET_NAME.test(name))
    throw new AmfError(
      'INVALID_REQUEST',
      `secret name '${name}' must be 1-128 characters of letters, digits, "_", "." or "-"`,
    );
  const envName = secretEnvName(name);
  const fromEnv = sources.env[envName];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const file = path.join(sources.dataDir, 'secrets', name);
  let st: Stats | undefined;
  try {
    st = lstatSync(file);
  } catch {
    st = undefined;
  }
  if (!st?.isFile())
    throw new AmfError(
      'INVALID_REQUEST',
      `secret '${name}' not found: set ${envName} or write it to ${file} (mode 0600)`,
    );
  const mode = st.mode;
  if ((mode & 0o077) !== 0) {
    throw new AmfError(
      'INVALID_REQUEST',
      `secret file ${file} is readable by other users (mode ${(mode & 0o777).toString(8)}): chmod 600 it`,
    );
  }
  const value = readBounded(file, `secret file ${file}`);
  if (!value) throw new AmfError('INVALID_REQUEST', `secret file ${file} is empty`);
  return value;
}

function resolveOne(ref: VariableRef, sources: StaticSources, asEnvName: string): string {
  if (ref.prefix === 'file') return resolveFile(ref.name, sources);
  if (ref.prefix === 'secret') return resolveSecret(ref.name.trim(), sources);
  const value = sources.env[asEnvName];
  if (value === undefined)
    throw new AmfError('INVALID_REQUEST', `environment variable ${asEnvName} is not set (${ref.source})`);
  if (value === '')
    throw new AmfError(
      'INVALID_REQUEST',
      `environment variable ${asEnvName} is set but empty (${ref.source})`,
    );
  return value;
}

/** The outcome of substituting one text. */
export interface Substitution {
  readonly text: string;
  readonly problems: VariableProblem[];
}

/**
 * Checks (and, with `resolve`, substitutes) the static variables of `text`. Without `resolve` nothing
 * is read: unset environment variables become notes (the validator never needs secrets), and
 * `file:`/`secret:` are only checked for their form.
 */
export function substituteStatic(
  text: string,
  context: VariableContext,
  sources: StaticSources,
  resolve: boolean,
): Substitution {
  const problems: VariableProblem[] = [];
  // The template renderers handle `$${` themselves; elsewhere it is resolved here.
  const literal = (segment: string): string =>
    context === 'prompt' || context === 'mcpPrompt' ? segment : segment.replace(/\$\$\{/g, '${');
  let out = '';
  let last = 0;
  for (const ref of scanVariables(text)) {
    const before = problems.length;
    const problem = (severity: 'error' | 'note', message: string): void => {
      problems.push({ severity, offset: ref.offset, source: ref.source, message });
    };
    let keep = !resolve;
    let envName = '';
    if (ref.prefix === 'http') {
      keep = true;
      if (context !== 'prompt')
        problem(
          'error',
          `${ref.source}: http variables are only allowed in the prompt of a webhook interface`,
        );
    } else if (ref.prefix === 'arg') {
      keep = true;
      // The body keeps unknown prefixes as text (see VariableContext).
      if (context !== 'mcpPrompt' && context !== 'body')
        problem(
          'error',
          `${ref.source}: arg variables are only allowed in the template of an x-amf.mcp prompt`,
        );
    } else if (ref.prefix === 'env' || (ref.prefix === '' && context !== 'body')) {
      envName = ref.name.trim();
      if (!ENV_NAME.test(envName)) {
        problem('error', `${ref.source}: '${envName}' is not an environment variable name`);
      } else if (!resolve && !sources.env[envName]) {
        problem(
          'note',
          `environment variable ${envName} is not set here; it must be set when the agent runs`,
        );
      }
    } else if (ref.prefix === 'file' || ref.prefix === 'secret') {
      if (!ref.name.trim())
        problem('error', `${ref.source}: expected a ${ref.prefix} name after '${ref.prefix}:'`);
    } else if (context === 'body') {
      keep = true;
    } else {
      problem(
        'error',
        `${ref.source}: unsupported variable prefix '${ref.prefix}:' (use env:, file: or secret:)`,
      );
    }
    if (keep || problems.length > before) continue;
    try {
      const value = resolveOne(ref, sources, envName);
      out += literal(text.slice(last, ref.offset)) + value;
      last = ref.offset + ref.source.length;
    } catch (err) {
      problem('error', (err as Error).message);
    }
  }
  out += literal(text.slice(last));
  return { text: out, problems };
}
