/**
 * Deterministic risk rules of the DMZ watcher. They read a raw advertisement as hostile text and
 * return a score in [0, 1] with short, stable reason codes. Pure functions, no I/O: the same
 * advertisement always scores the same, so the rules are the floor an optional LLM can only raise.
 *
 * Scoring: every finding has a weight; findings combine as independent evidence,
 * `1 - Π(1 - w)`, so more findings always mean more risk and the score never leaves [0, 1]. Each
 * reason code counts once (with its heaviest weight) so a long list of one trick is not worse than
 * a short one. Weights above 0.7 deny at every visibility level (the most lenient locked threshold
 * is `local` 0.7, equal allowed); 0.3–0.7 denies for `mesh`/`public` only.
 */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import { MAX_TXT_BYTES } from '../discovery/advertisement.js';
import { isCapabilityTag } from '../events/subjects.js';
import { bareHost, isLocalNetworkHost, sameHost } from '../net/hostRules.js';
import {
  CONTROL_CHAR,
  INVISIBLE_CHAR,
  normalise,
  splitTxtList,
  validCapabilities,
} from './advertisementText.js';

// The text helpers live in advertisementText.ts; re-exported so importers keep one entry point.
export {
  MAX_SUMMARY_CHARS,
  reportedFields,
  sanitizeText,
  splitTxtList,
  summaryText,
  truncateText,
  validCapabilities,
  type ReportedFields,
} from './advertisementText.js';

/** What the rules found about one advertisement. */
export interface RulesResult {
  /** 0 (nothing found) .. 1 (hostile), rounded to 3 decimals. */
  score: number;
  /** Stable reason codes (sorted), empty when nothing was found. */
  reasons: string[];
  /** The advertised capability tags that are valid (`[a-z0-9-]+`), deduplicated, in order. */
  capabilities: string[];
}

/**
 * Weight of each reason code. Exported so tests and operators can see the whole scale in one place;
 * the codes are stable identifiers (they appear in `risk_reason` and logs), the weights may be tuned.
 */
export const RULE_WEIGHTS = {
  /** A required key (id, ep, proto) is missing: nothing to vouch for. */
  missing_field: 1,
  /** The TXT record is larger than the wire limit or was not valid UTF-8. */
  malformed_record: 0.9,
  /** "ignore previous instructions", "you are now ...", "new instructions", jailbreak vocabulary. */
  prompt_injection: 0.9,
  /** Text aimed at the scorer itself: "approve", "risk score", "safe to admit", "low risk". */
  scorer_manipulation: 0.9,
  /** Chat-template or role markers: "system:", "<|im_start|>", "[INST]", "### Instruction". */
  role_marker: 0.85,
  /** Role-play / persona requests: "act as", "pretend to be", "roleplay". */
  role_play: 0.85,
  /** A URL with user:password@ — a classic way to make one host look like another. */
  url_credentials: 0.85,
  /** ep/card/mcp that is not an http(s) URL (javascript:, file:, data:, garbage). */
  bad_url: 0.85,
  /** Zero-width, bidi-override or Unicode tag characters: text meant to be read differently by machines and people. */
  invisible_chars: 0.85,
  /** C0/C1 control characters. */
  control_chars: 0.8,
  /** HTML/script, event handlers, entities, markdown links or images. */
  markup: 0.8,
  /** A long base64-looking run: a payload smuggled past human review. */
  encoded_blob: 0.75,
  /** vis=local (or absent) but the endpoint or MCP URL points off the local network. */
  endpoint_not_local: 0.75,
  /** The agent card is served by a different host than the endpoint. */
  card_host_mismatch: 0.6,
  /** Non-ASCII characters in machine fields: homoglyph spoofing of ids, hosts or tags. */
  non_ascii: 0.5,
  /** Template syntax ({{ }}, ${ }, <% %>) that some downstream renderer might evaluate. */
  template_syntax: 0.5,
  /** The MCP endpoint is on a different host than the agent endpoint. */
  mcp_host_mismatch: 0.4,
  /** A capability tag that names dangerous power (code-exec, shell, admin, root, exfil...). */
  high_risk_capability: 0.4,
  /** A value longer than anything a legitimate TXT field needs. */
  long_value: 0.4,
  /** Punycode (xn--) host: usually an internationalised look-alike. */
  punycode_host: 0.4,
  /** A capability tag that is not `[a-z0-9-]+` (it is left out of the capabilities). */
  invalid_tag: 0.3,
  /** vis/status with a value outside the vocabulary. */
  bad_value: 0.3,
  /** A protocol that is not of the form A2A|MCP|AMP/<version>. */
  unusual_protocol: 0.15,
} as const;

/** A stable reason code of the rules. */
export type RuleReason = keyof typeof RULE_WEIGHTS;

/** Values longer than this are suspicious (a single TXT string is at most 255 bytes on the wire). */
const LONG_VALUE_CHARS = 200;

// Phrases are matched on a normalised copy (see normalise()): lower case, NFKC, separators → space.
const INJECTION_PATTERNS: RegExp[] = [
  /\b(ignore|disregard|forget|override|bypass|skip|drop)\b.{0,30}\b(previous|prior|above|earlier|preceding|all|any|your|system|original)\b.{0,30}\b(instruction|instructions|prompt|prompts|rule|rules|direction|directions|guideline|guidelines|context|message|messages|constraints?)\b/,
  /\b(ignore|disregard|forget)\b (all |the |any |everything )?(previous|prior|above|earlier|preceding|everything)\b/,
  /\byou are (now|no longer|free|actually)\b/,
  /\byou re now\b|\byoure now\b/,
  /\bfrom now on\b/,
  /\bnew (instruction|instructions|rule|rules|task|role|objective|directive)\b/,
  /\b(system|developer|hidden|initial) (prompt|message|instruction|instructions)\b/,
  /\b(developer|god|admin|dan|debug|unrestricted) mode\b/,
  /\bjail ?break/,
  /\bdo anything now\b/,
  /\b(respond|reply|answer|output|print|say|return) (only )?(with|exactly|the following|json)\b/,
  /\binstructions? for (the )?(ai|model|llm|assistant|classifier|scorer|watcher)\b/,
  /\b(dear|attention|note to|hey) (ai|model|llm|assistant|claude|gpt|chatgpt|classifier|scorer|watcher|reviewer)\b/,
];

const MANIPULATION_PATTERNS: RegExp[] = [
  /\b(approve|approved|approves|approving|pre approved|preapproved)\b/,
  /\brisk ?(score|scores|scoring|level|rating|assessment|value)\b/,
  /\b(low|no|zero|minimal|negligible|nil) risk\b/,
  /\b(safe|trusted|verified|legitimate|benign|harmless|vetted|certified) (agent|service|node|to admit|to approve|to trust|to allow|by)\b/,
  /\b(is|am|are) (safe|trusted|verified|legitimate|benign|harmless|vetted)\b/,
  /\bdo not (flag|block|deny|reject|report|score|quarantine)\b/,
  /\b(whitelist|whitelisted|allowlist|allowlisted|allow listed)\b/,
  /\b(admit|accept|allow|pass|classify) (this|me|it|us)\b/,
  /\bclassif(y|ied) (as|this)\b/,
];

const ROLE_PLAY_PATTERNS: RegExp[] = [
  /\b(act|behave|respond|answer|speak|function) as (if|an?|the|my|your)\b/,
  /\bpretend (to be|you|that|i)\b/,
  /\brole ?play/,
  /\bin character\b/,
  /\bimpersonat/,
  /\bplay the (role|part)\b/,
  /\byour (new )?(role|persona|identity) is\b/,
];

// Squashed (all non-alphanumerics removed) markers catch "i.g.n.o.r.e p r e v i o u s" spelling.
const SQUASHED_MARKERS = [
  'ignoreprevious',
  'ignoreallprevious',
  'ignoreprior',
  'disregardprevious',
  'disregardabove',
  'youarenow',
  'systemprompt',
  'newinstructions',
  'riskscore',
  'approvethis',
  'jailbreak',
];

// Role markers are matched on the raw value: they need their punctuation. A marker must start the
// value or follow whitespace or quoting/bracket punctuation, so `user:` inside a URL authority
// (after `//`) or a DID segment (after `:` or `.`) does not count here (credentials in a URL have
// their own rule).
const ROLE_MARKER_PATTERNS: RegExp[] = [
  /(^|[\s"'`>\])(;,|{}*#])(system|assistant|user|human|developer|tool)\s*:/i,
  /<\|[a-z_ ]{1,30}\|>/i,
  /\[\/?inst\]/i,
  /<<\/?sys>>/i,
  /(^|\n)\s*#{1,6}\s*(instruction|instructions|system|response|assistant|user)\b/i,
  /<\/?(system|assistant|user|instructions?|prompt)>/i,
];

const MARKUP_PATTERNS: RegExp[] = [
  /<\s*\/?\s*[a-z!?][^>]*>/i,
  /<\s*script/i,
  /\b(javascript|vbscript)\s*:/i,
  /\bdata\s*:\s*[a-z]+\/[a-z0-9.+-]+[;,]/i,
  /\bon(error|load|click|mouseover|mouseenter|focus|blur|submit|change|input|keydown|keyup|message|toggle|animationstart)\s*=/i,
  /&(#x?[0-9a-f]{1,6}|lt|gt|quot|amp|apos|nbsp);/i,
  /!\[[^\]]*\]\(/,
  /\[[^\]]*\]\(\s*(https?|javascript|data):/i,
];

const TEMPLATE_PATTERN = /\{\{|\}\}|\$\{|<%|%>|\{%|%\}/;

// Standard and URL-safe base64 runs. A run must mix upper case, lower case and digits: that rules
// out words, hex hashes and UUIDs, which are single-case.
const BASE64_RUN = /[A-Za-z0-9+/]{40,}={0,2}|[A-Za-z0-9_-]{40,}/g;

const PROTOCOL_PATTERN = /^(A2A|MCP|AMP)\/[0-9A-Za-z.-]{1,20}$/;
const DID_PATTERN = /^did:[a-z0-9]+:[A-Za-z0-9._:%-]+$/;

// Tag segments (split on '-') that name dangerous power. Matching whole segments keeps e.g. "arm"
// or "shellfish" out, while "code-exec", "remote-shell" and "sys-admin" are caught.
const HIGH_RISK_SEGMENTS = new Set([
  'exec',
  'execute',
  'execution',
  'eval',
  'shell',
  'bash',
  'zsh',
  'cmd',
  'powershell',
  'terminal',
  'admin',
  'administrator',
  'root',
  'sudo',
  'superuser',
  'privesc',
  'privilege',
  'escalation',
  'rce',
  'backdoor',
  'rootkit',
  'malware',
  'ransomware',
  'spyware',
  'botnet',
  'ddos',
  'wipe',
  'payload',
  'implant',
  'c2',
]);
const HIGH_RISK_PREFIXES = ['exfil', 'keylog', 'credential', 'password', 'passwd', 'secret', 'token-steal'];

/** True when `tag` names dangerous power (see HIGH_RISK_SEGMENTS). */
export function isHighRiskTag(tag: string): boolean {
  if (HIGH_RISK_PREFIXES.some((p) => tag.startsWith(p) || tag.includes(`-${p}`))) return true;
  return tag.split('-').some((segment) => HIGH_RISK_SEGMENTS.has(segment));
}

/** Parses `value` as a URL; undefined when it does not parse. */
function parseUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

/** Host name of a URL without IPv6 brackets or a trailing dot, lower case. */
function urlHost(url: URL): string {
  return bareHost(url.hostname);
}

/**
 * True when `host` can only be on the local network (the watcher's heuristic; hostRules is the one
 * judge, re-exported here under the name the watcher's callers and tests use).
 */
export const isLocalHost = isLocalNetworkHost;

/** True when some base64-looking run in `value` mixes upper case, lower case and digits. */
function hasEncodedBlob(value: string): boolean {
  for (const m of value.matchAll(BASE64_RUN)) {
    const run = m[0];
    if (/[A-Z]/.test(run) && /[a-z]/.test(run) && /[0-9]/.test(run)) return true;
  }
  return false;
}

/** Collects reason codes, keeping each once. */
class Findings {
  readonly codes = new Set<RuleReason>();
  add(code: RuleReason): void {
    this.codes.add(code);
  }
}

/** Checks one piece of untrusted text for every text-level trick. */
/** An NATS nkey user public key: `U` and 55 base32 characters. */
const NKEY_PATTERN = /^U[A-Z2-7]{55}$/;

function scanText(text: string, findings: Findings, opts: { skipBlob?: boolean } = {}): void {
  if (text.length === 0) return;
  if (INVISIBLE_CHAR.test(text)) findings.add('invisible_chars');
  if (CONTROL_CHAR.test(text)) findings.add('control_chars');
  if (text.length > LONG_VALUE_CHARS) findings.add('long_value');
  if (ROLE_MARKER_PATTERNS.some((p) => p.test(text))) findings.add('role_marker');
  if (MARKUP_PATTERNS.some((p) => p.test(text))) findings.add('markup');
  if (TEMPLATE_PATTERN.test(text)) findings.add('template_syntax');
  if (!opts.skipBlob && hasEncodedBlob(text)) findings.add('encoded_blob');
  const norm = normalise(text);
  if (INJECTION_PATTERNS.some((p) => p.test(norm))) findings.add('prompt_injection');
  if (MANIPULATION_PATTERNS.some((p) => p.test(norm))) findings.add('scorer_manipulation');
  if (ROLE_PLAY_PATTERNS.some((p) => p.test(norm))) findings.add('role_play');
  const squashed = norm.replace(/[^\p{L}\p{N}]/gu, '');
  if (SQUASHED_MARKERS.some((m) => squashed.includes(m))) {
    if (squashed.includes('riskscore') || squashed.includes('approvethis'))
      findings.add('scorer_manipulation');
    else findings.add('prompt_injection');
  }
}

/** Checks a URL-valued key; returns the parsed URL when it is a usable http(s) URL. */
function checkUrl(value: string | undefined, findings: Findings): URL | undefined {
  if (value === undefined) return undefined;
  const url = parseUrl(value.trim());
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    findings.add('bad_url');
    return undefined;
  }
  // The raw text is checked too: WHATWG parsing would silently normalise some tricks away.
  if (url.username || url.password || /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(value.trim())) {
    findings.add('url_credentials');
  }
  if (urlHost(url).startsWith('xn--') || urlHost(url).includes('.xn--')) findings.add('punycode_host');
  return url;
}

/** Combines weights as independent evidence; 0 when there is none. */
function combine(codes: Iterable<RuleReason>): number {
  let keep = 1;
  for (const code of codes) keep *= 1 - RULE_WEIGHTS[code];
  return Math.min(1, Math.max(0, Math.round((1 - keep) * 1000) / 1000));
}

/**
 * Scores an advertisement by the deterministic rules. Pure and total: any input shape that
 * satisfies the type (including empty or hostile values) yields a result, never an exception.
 */
export function scoreByRules(ad: RawAdvertisement): RulesResult {
  const findings = new Findings();
  const txt = ad.txt;

  if (ad.txt_bytes > MAX_TXT_BYTES || ad.invalid_utf8 === true) findings.add('malformed_record');
  for (const key of ['id', 'ep', 'proto'] as const) {
    if (!txt[key] || txt[key].trim() === '') findings.add('missing_field');
  }

  // Every key and value is attacker-written, including keys outside the TXT vocabulary and the
  // mDNS instance name: all of it is read as possibly hostile text.
  for (const [key, value] of Object.entries(txt)) {
    scanText(key, findings);
    // DIDs legitimately carry long mixed-case identifiers (did:key:z6Mk...), which look like base64;
    // so does the agent's nkey public key (`nk`, base32), which is checked exactly by admission.
    scanText(value, findings, {
      skipBlob: (key === 'id' && DID_PATTERN.test(value)) || (key === 'nk' && NKEY_PATTERN.test(value)),
    });
    // eslint-disable-next-line no-control-regex -- non-ASCII test, not a control-char test
    if (/[^\u0000-\u007f]/.test(value)) findings.add('non_ascii');
    if (value.includes('\ufffd')) findings.add('malformed_record');
  }
  if (ad.instance !== undefined) scanText(ad.instance, findings);

  const ep = checkUrl(txt.ep, findings);
  const card = checkUrl(txt.card, findings);
  const mcp = checkUrl(txt.mcp, findings);

  const visibility = txt.vis ?? 'local';
  if (!['local', 'mesh', 'public'].includes(visibility)) findings.add('bad_value');
  if (txt.status !== undefined && !['active', 'degraded', 'draining', 'offline'].includes(txt.status)) {
    findings.add('bad_value');
  }
  if (visibility === 'local') {
    if (ep && !isLocalHost(urlHost(ep))) findings.add('endpoint_not_local');
    if (mcp && !isLocalHost(urlHost(mcp))) findings.add('endpoint_not_local');
  }
  if (ep && card && !sameHost(urlHost(ep), urlHost(card))) findings.add('card_host_mismatch');
  if (ep && mcp && !sameHost(urlHost(ep), urlHost(mcp))) findings.add('mcp_host_mismatch');

  if (splitTxtList(txt.proto).some((p) => !PROTOCOL_PATTERN.test(p))) findings.add('unusual_protocol');

  const tags = splitTxtList(txt.tags);
  if (tags.some((t) => !isCapabilityTag(t))) findings.add('invalid_tag');
  const capabilities = validCapabilities(ad);
  if (capabilities.some(isHighRiskTag)) findings.add('high_risk_capability');

  const reasons = [...findings.codes].sort();
  return { score: combine(findings.codes), reasons, capabilities };
}
