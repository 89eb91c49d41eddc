/**
 * Judging one advertisement in a `vm` context created for it alone: new globals and intrinsics, the
 * rules script (compiled once per thread, see rulesScript.ts) evaluated afresh in it, bounded in
 * time by the `vm` timeout, and dropped afterwards. Code is shared between contexts; state is not,
 * so nothing one advertisement does to the rules' objects (prototypes, globals, module state) can
 * reach the next.
 *
 * Only data crosses the context's edge: the input goes in as one JSON string (the advertisement and
 * the URL facts the context cannot compute itself), the verdict comes out as JSON text. The context
 * has no `process`, no `require`, no timers, and cannot compile code from strings.
 */
import { isIPv6 } from 'node:net';
import vm from 'node:vm';
import type { RawAdvertisement } from '../discovery/advertisement.js';
import { bareHost } from '../net/hostRules.js';
import type { ContextVerdict } from './contextEntry.js';
import { RULES_INPUT_GLOBAL } from './rulesScript.js';

/** The parsed fields of one URL, as the rules read them. */
interface UrlFacts {
  protocol: string;
  username: string;
  password: string;
  hostname: string;
}

/** What the rules need that a context cannot compute: WHATWG URL parsing and IPv6 validation. */
export interface RulesFacts {
  /** `[value, fields]` for each URL-valued TXT field (trimmed, as the rules parse it) that parses. */
  urls: [string, UrlFacts][];
  /** The bare URL hosts (no brackets) that are IPv6 addresses. */
  ipv6Hosts: string[];
}

/** The TXT keys the rules parse as URLs. */
const URL_KEYS = ['ep', 'card', 'mcp'] as const;

/** Parses the advertisement's URL fields outside the context; see {@link RulesFacts}. */
export function rulesFacts(ad: RawAdvertisement): RulesFacts {
  const urls: [string, UrlFacts][] = [];
  const ipv6Hosts: string[] = [];
  for (const key of URL_KEYS) {
    const value = ad.txt[key]?.trim();
    if (value === undefined) continue;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      continue;
    }
    urls.push([
      value,
      { protocol: url.protocol, username: url.username, password: url.password, hostname: url.hostname },
    ]);
    const host = bareHost(url.hostname);
    if (host.includes(':') && isIPv6(host)) ipv6Hosts.push(host);
  }
  return { urls, ipv6Hosts };
}

/** Why a judgement in a context produced no verdict. */
export class ContextJudgeError extends Error {
  constructor(
    readonly reason: 'timeout' | 'failed',
    message: string,
  ) {
    super(message);
    this.name = 'ContextJudgeError';
  }
}

/**
 * Runs `script` in a new context for `ad`; `timeoutMs` bounds its synchronous run (microtasks
 * included). Throws {@link ContextJudgeError}: `timeout` past the limit, `failed` when the script
 * throws or its completion value is not a JSON object. The message never quotes the advertisement.
 */
export function judgeInFreshContext(
  script: vm.Script,
  ad: RawAdvertisement,
  timeoutMs: number,
): ContextVerdict {
  // A null-prototype sandbox: the context's global reaches nothing of this realm through it.
  const sandbox = Object.create(null) as Record<string, unknown>;
  sandbox[RULES_INPUT_GLOBAL] = JSON.stringify({ ad, facts: rulesFacts(ad) });
  const context = vm.createContext(sandbox, {
    name: 'amf-watcher-rules',
    codeGeneration: { strings: false, wasm: false },
    microtaskMode: 'afterEvaluate',
  });
  let out: unknown;
  try {
    out = script.runInContext(context, { timeout: timeoutMs, breakOnSigint: false });
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (code === 'ERR_SCRIPT_EXECUTION_TIMEOUT')
      throw new ContextJudgeError('timeout', `the rules ran past their ${timeoutMs} ms limit`);
    const name = typeof (err as { name?: unknown } | null)?.name === 'string' ? (err as Error).name : 'error';
    throw new ContextJudgeError('failed', `the rules failed in their context (${name.slice(0, 40)})`);
  }
  if (typeof out !== 'string') throw new ContextJudgeError('failed', 'the rules gave no verdict text');
  let verdict: unknown;
  try {
    verdict = JSON.parse(out);
  } catch {
    throw new ContextJudgeError('failed', 'the rules gave a verdict that is not JSON');
  }
  if (typeof verdict !== 'object' || verdict === null || Array.isArray(verdict))
    throw new ContextJudgeError('failed', 'the rules gave a verdict that is not an object');
  return verdict as ContextVerdict;
}
