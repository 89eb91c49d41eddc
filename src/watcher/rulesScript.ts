/**
 * The risk rules as ONE classic script, for running in a fresh `vm` context per advertisement (see
 * contextJudge.ts). A `vm` context cannot import modules, so the compiled rules modules in dist/ are
 * linked here into a single script: each module body is wrapped in a function of its own, its
 * `import { a } from './x.js'` becomes a read of the already linked module `x`, and its exported
 * declarations are returned. Only the fixed list {@link RULES_MODULES} is linked, and anything the
 * linker does not understand (default or star exports, dynamic import, `import.meta`, an import of
 * a module outside the list) is an error when the pool is made, never a silently different script.
 * The pool links once and hands the script text to each thread it starts.
 *
 * What a context lacks is supplied as DATA by the prelude, never as an object from outside:
 *  - `URL`: the WHATWG parser runs outside the context (see `urlFacts` in contextJudge.ts) on the
 *    three URL-valued TXT fields, and the prelude's `URL` answers from those results only;
 *  - `node:net` `isIPv6`: answered from the set of URL hosts found to be IPv6 outside (the rules
 *    only ask it about those hosts).
 * The script reads its input from the context global {@link RULES_INPUT_GLOBAL} (a JSON string) and
 * its completion value is the verdict as JSON text (see contextEntry.ts).
 */
import { readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { WatcherError } from './watcherError.js';
import { AmfError } from '../errors.js';

/** The context global holding the input, a JSON string `{ ad, facts }`. */
export const RULES_INPUT_GLOBAL = 'AMF_RULES_INPUT';

/** The modules linked into the script, dependencies first; paths relative to dist/, without `.js`. */
export const RULES_MODULES = [
  // events/subjects throws AmfErrors (for callers outside; the rules only test tags with it).
  'errors',
  'discovery/advertisement',
  'events/subjects',
  'net/hostRules',
  'watcher/advertisementText',
  'watcher/riskRules',
  'watcher/contextEntry',
] as const;

/** The entry module and the function the script ends by calling with the advertisement. */
const ENTRY = { module: 'watcher/contextEntry', fn: 'judgeInContext' };

/** Built-in modules the linked code may import, with what the prelude supplies for each. */
const BUILTINS: Readonly<Record<string, { binding: string; names: readonly string[] }>> = {
  'node:net': { binding: '__amfNodeNet', names: ['isIPv6'] },
};

// Runs first in every context. `AMF_RULES_INPUT` is the only thing the context is given.
const PRELUDE = `'use strict';
const __amfInput = JSON.parse(globalThis.${RULES_INPUT_GLOBAL});
const __amfUrls = new Map(__amfInput.facts.urls);
const __amfIpv6Hosts = new Set(__amfInput.facts.ipv6Hosts);
// The rules' only use of URL: parse a TXT URL value and read these four fields.
const URL = class URL {
  constructor(value) {
    const facts = __amfUrls.get(String(value));
    if (facts === undefined) throw new TypeError('Invalid URL');
    this.protocol = facts.protocol;
    this.username = facts.username;
    this.password = facts.password;
    this.hostname = facts.hostname;
  }
};
const __amfNodeNet = { isIPv6: (host) => __amfIpv6Hosts.has(host) };
const __amfModules = Object.create(null);
`;

const IMPORT_LINE = /^import \{([^}]*)\} from '([^']+)';$/gm;
const REEXPORT_LINE = /^export \{[^}]*\} from '[^']+';$/gm;
const EXPORT_DECL = /^export (?:async function\*? |function\*? |const |let |class )(\w+)/gm;

/** The module id an import specifier of module `from` names (`../net/hostRules.js` → `net/hostRules`). */
function resolveId(from: string, specifier: string): string {
  const path = new URL(specifier, `file:///root/${from}.js`).pathname;
  return path.replace(/^\/root\//, '').replace(/\.js$/, '');
}

/** `a, b as c` → `a, b: c` (a destructuring pattern), with the imported names. */
function bindings(list: string): { pattern: string; names: string[] } {
  const parts = list
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
  const names = parts.map((p) => p.split(/\s+as\s+/)[0]!);
  return { pattern: parts.map((p) => p.replace(/\s+as\s+/, ': ')).join(', '), names };
}

/** Links one compiled module; `exportsOf` holds the exports of the modules linked before it. */
function linkModule(id: string, code: string, exportsOf: Map<string, Set<string>>): string {
  let body = code.replace(/^\/\/# sourceMappingURL=.*$/gm, '').replace(REEXPORT_LINE, '');
  body = body.replace(IMPORT_LINE, (_line, list: string, specifier: string) => {
    const { pattern, names } = bindings(list);
    const builtin = BUILTINS[specifier];
    if (builtin) {
      const missing = names.filter((n) => !builtin.names.includes(n));
      if (missing.length > 0)
        throw new AmfError('INTERNAL', `rules script: ${id} imports ${missing.join(', ')} from ${specifier}`);
      return `const { ${pattern} } = ${builtin.binding};`;
    }
    const target = resolveId(id, specifier);
    const exported = exportsOf.get(target);
    if (!exported)
      throw new AmfError(
        'INTERNAL',
        `rules script: ${id} imports ${specifier}, which is not linked before it`,
      );
    const missing = names.filter((n) => !exported.has(n));
    if (missing.length > 0)
      throw new AmfError('INTERNAL', `rules script: ${target} does not export ${missing.join(', ')}`);
    return `const { ${pattern} } = __amfModules[${JSON.stringify(target)}];`;
  });
  const names = new Set<string>();
  body = body.replace(EXPORT_DECL, (decl: string, name: string) => {
    names.add(name);
    return decl.slice('export '.length);
  });
  const leftover =
    /^(import|export)\b.*$/m.exec(body) ?? /\bimport\s*\(|\bimport\.meta\b|\brequire\s*\(/.exec(body);
  if (leftover)
    throw new AmfError(
      'INTERNAL',
      `rules script: ${id} has "${leftover[0].slice(0, 60)}", which cannot be linked`,
    );
  exportsOf.set(id, names);
  return `__amfModules[${JSON.stringify(id)}] = (() => {\n${body}\nreturn { ${[...names].join(', ')} };\n})();\n`;
}

/**
 * The linked rules script, from the compiled modules under `distRoot` (the dist/ directory URL, with
 * a trailing slash). Throws when a module is missing or cannot be linked.
 */
export function buildRulesScript(distRoot: URL): string {
  const exportsOf = new Map<string, Set<string>>();
  const parts = [PRELUDE];
  for (const id of RULES_MODULES) {
    parts.push(linkModule(id, readFileSync(new URL(`${id}.js`, distRoot), 'utf8'), exportsOf));
  }
  if (!exportsOf.get(ENTRY.module)?.has(ENTRY.fn))
    throw new AmfError('INTERNAL', `rules script: no ${ENTRY.fn} to call`);
  parts.push(`__amfModules[${JSON.stringify(ENTRY.module)}].${ENTRY.fn}(__amfInput.ad);\n`);
  return parts.join('\n');
}

/**
 * The rules script a pool hands its threads: the file at `scriptPath` when given (tests inject
 * rules that misbehave; it must be absolute), else the rules linked from `distRoot`. Throws
 * WATCHER_THREAD_MISSING when the modules or the file cannot be read or linked.
 */
export function loadRulesScript(distRoot: URL, scriptPath?: string): string {
  if (scriptPath !== undefined && !isAbsolute(scriptPath))
    throw new TypeError('rulesScriptPath must be an absolute path');
  try {
    return scriptPath === undefined ? buildRulesScript(distRoot) : readFileSync(scriptPath, 'utf8');
  } catch (err) {
    throw new WatcherError(
      'WATCHER_THREAD_MISSING',
      `DMZ watcher rules: ${err instanceof Error ? err.message : String(err)} (npm run build first)`,
      {
        cause: err,
      },
    );
  }
}
