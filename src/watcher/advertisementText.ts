/**
 * Reading an advertisement's attacker-written TXT text safely: normalisation for the risk rules'
 * pattern matching, sanitising and truncating for display, and the TXT lists and fields exactly as
 * the coordinator reads them. Pure functions, no I/O; runs inside the watcher threads too.
 */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import { isCapabilityTag } from '../events/subjects.js';

/** The summary text is at most this long (notes/amf.md section 6). */
export const MAX_SUMMARY_CHARS = 100;

// Zero-width, bidi embedding/override/isolate, word joiner & invisible operators, BOM, Mongolian
// vowel separator, soft hyphen, and the Unicode "tag" block used for ASCII smuggling.
export const INVISIBLE_CHAR =
  /[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u{e0000}-\u{e007f}]/u;
const INVISIBLE_GLOBAL =
  /[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u{e0000}-\u{e007f}]/gu;
// eslint-disable-next-line no-control-regex -- detecting control characters is the point
export const CONTROL_CHAR = /[\u0000-\u001f\u007f-\u009f]/;
// eslint-disable-next-line no-control-regex -- removing control characters is the point
const CONTROL_GLOBAL = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * Lower-cases, applies NFKC (fullwidth and other compatibility forms fold to ASCII), removes
 * invisible characters (so "ig\u200bnore" still reads "ignore"), drops apostrophes ("you're" →
 * "youre") and turns every other non-alphanumeric run into one space.
 */
export function normalise(value: string): string {
  return value
    .normalize('NFKC')
    .replace(INVISIBLE_GLOBAL, '')
    .toLowerCase()
    .replace(/['’‘`]/g, '')
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

/** Removes control, zero-width and bidi characters and collapses whitespace; never throws. */
export function sanitizeText(value: string): string {
  return value
    .normalize('NFKC')
    .replace(INVISIBLE_GLOBAL, '')
    .replace(CONTROL_GLOBAL, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Truncates to at most `max` UTF-16 units without splitting a surrogate pair, marking the cut with "…". */
export function truncateText(value: string, max: number): string {
  if (value.length <= max) return value;
  let out = '';
  for (const ch of value) {
    if (out.length + ch.length > max - 1) break;
    out += ch;
  }
  return out + '…';
}

/**
 * The watcher's one-line description: `"<agent id> offers <tags>"`, sanitized and at most 100
 * characters. Only valid tags are listed, so the text carries nothing the tag syntax forbids.
 */
export function summaryText(agentId: string | undefined, capabilities: readonly string[]): string {
  const id = sanitizeText(agentId ?? '') || '(no id)';
  const offers = capabilities.length > 0 ? capabilities.join(', ') : 'no capabilities';
  return truncateText(`${id} offers ${offers}`, MAX_SUMMARY_CHARS);
}

/** Splits a comma-separated TXT list the way the coordinator does: trimmed, empties dropped. */
export function splitTxtList(value: string | undefined): string[] {
  if (value === undefined) return [];
  return value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
}

/** The TXT fields a WatcherSummary reports as read, for the coordinator to cross-check (#9). */
export interface ReportedFields {
  original_agent_id: string;
  endpoint: string;
  card_url: string | null;
  protocols_supported: string[];
  trust_domain: string;
}

/**
 * Reads the reported fields exactly as the TXT has them — values verbatim, `proto` split like the
 * coordinator splits it, an absent `td` read as the AMF default `local` — so a faithful watcher
 * never trips the cross-check and an unfaithful one always does.
 */
export function reportedFields(ad: RawAdvertisement): ReportedFields {
  const txt = ad.txt;
  return {
    original_agent_id: txt.id ?? '',
    endpoint: txt.ep ?? '',
    card_url: txt.card ?? null,
    protocols_supported: splitTxtList(txt.proto),
    trust_domain: txt.td ?? 'local',
  };
}

/** The valid capability tags of an advertisement, deduplicated, first occurrence order. */
export function validCapabilities(ad: RawAdvertisement): string[] {
  return [...new Set(splitTxtList(ad.txt.tags).filter((t) => isCapabilityTag(t)))];
}
