/**
 * The TXT record of `_amf-agent._tcp` services (RFC 6763 section 6, AMF SPEC v0.2 section 2): an
 * AgentRecord in short keys, as length-prefixed `key=value` strings of at most 512 bytes in all.
 * Encoding refuses what the wire cannot carry; decoding never refuses, it measures and flags, because
 * judging an advertisement is the admission pipeline's job and it needs the facts (size, invalid
 * UTF-8, duplicate keys) rather than a thrown error.
 */
import { AmfError } from '../errors.js';
import type { AgentRecord } from '../events/agentRecord.js';
import { MAX_TXT_BYTES, type TxtKey } from './advertisement.js';

/**
 * An extra TXT key beyond TXT_KEYS: `role=coordinator` marks the coordinator's own advertisement so
 * that `amf worker` without `--coordinator` can find it (findCoordinator.ts). Agents do not set it;
 * admission ignores it like any unknown key.
 */
export const TXT_ROLE_KEY = 'role';
/** The value of TXT_ROLE_KEY on the coordinator's advertisement. */
export const COORDINATOR_ROLE = 'coordinator';

/** One TXT string holds at most 255 bytes: its length travels in one byte (RFC 6763 section 6.1). */
const MAX_STRING_BYTES = 255;

/**
 * Maps an AgentRecord to TXT keys (id, ep, proto, tags, td, vis, v, status, card, mcp, nk). List values
 * are comma-separated (SPEC v0.2); absent fields and empty lists are left out rather than sent empty,
 * so a missing required field stays visibly missing to validation.
 */
export function agentRecordToTxt(record: AgentRecord): Record<string, string> {
  const fields: Record<TxtKey, string | string[] | undefined> = {
    id: record.agent_id,
    ep: record.endpoint,
    proto: record.protocols_supported,
    tags: record.capability_tags,
    td: record.trust_domain,
    vis: record.visibility,
    v: record.version,
    status: record.status,
    card: record.card_url,
    mcp: record.mcp_endpoint,
    nk: record.nkey,
  };
  const txt: Record<string, string> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) {
      if (value.length === 0) continue;
      const withComma = value.find((item) => item.includes(','));
      if (withComma !== undefined) {
        // A comma inside one item would silently split it into two on the receiving side.
        throw new AmfError('INVALID_REQUEST', `TXT key "${key}": list item "${withComma}" contains a comma`);
      }
      txt[key] = value.join(',');
    } else {
      txt[key] = value;
    }
  }
  return txt;
}

/** The coordinator's advertisement: its AgentRecord's TXT plus `role=coordinator`. */
export function coordinatorTxt(record: AgentRecord): Record<string, string> {
  return { ...agentRecordToTxt(record), [TXT_ROLE_KEY]: COORDINATOR_ROLE };
}

/**
 * Encodes TXT pairs as `key=value` strings (UTF-8). Throws an INVALID_REQUEST AmfError for a key that
 * RFC 6763 section 6.4 does not allow (empty, `=`, non-printable or non-ASCII), a key repeated in
 * another case, a string over 255 bytes, and PAYLOAD_TOO_LARGE when the record would exceed 512 bytes.
 */
export function encodeTxt(txt: Record<string, string>): Buffer[] {
  const seen = new Set<string>();
  const buffers: Buffer[] = [];
  for (const [key, value] of Object.entries(txt)) {
    if (!/^[\x20-\x3c\x3e-\x7e]+$/.test(key)) {
      throw new AmfError(
        'INVALID_REQUEST',
        `TXT key "${key}" must be 1+ printable ASCII characters without "="`,
      );
    }
    const lower = asciiLower(key);
    if (seen.has(lower)) {
      throw new AmfError('INVALID_REQUEST', `TXT key "${key}" appears twice (keys are case-insensitive)`);
    }
    seen.add(lower);
    const buffer = Buffer.from(`${key}=${value}`, 'utf8');
    if (buffer.length > MAX_STRING_BYTES) {
      throw new AmfError(
        'INVALID_REQUEST',
        `TXT string "${key}=..." is ${buffer.length} bytes; one string holds at most ${MAX_STRING_BYTES}`,
      );
    }
    buffers.push(buffer);
  }
  const size = txtSize(buffers);
  if (size > MAX_TXT_BYTES) {
    throw new AmfError(
      'PAYLOAD_TOO_LARGE',
      `TXT record is ${size} bytes; AMF allows at most ${MAX_TXT_BYTES} (shorten values or drop optional keys)`,
      { bytes: size, limit: MAX_TXT_BYTES },
    );
  }
  return buffers;
}

/** Size of a TXT record on the wire: each string plus its length byte. */
export function txtSize(buffers: readonly Uint8Array[]): number {
  return buffers.reduce((sum, buffer) => sum + 1 + buffer.length, 0);
}

/** What decodeTxt found in a received TXT record. */
export interface DecodedTxt {
  /** Pairs with lowercased keys; a key without `=` maps to ''. Invalid UTF-8 arrives as U+FFFD. */
  txt: Record<string, string>;
  /** Some string was not valid UTF-8. */
  invalidUtf8: boolean;
  /** Size on the wire (txtSize). */
  bytes: number;
  /** Lowercased keys that appeared more than once; the first occurrence was kept. */
  duplicateKeys: string[];
}

/**
 * Decodes received TXT strings without trusting them. Keys are case-insensitive (RFC 6763 section
 * 6.4), so they are lowercased and the first occurrence wins, as the RFC says for repeated keys;
 * strings that are empty or start with `=` carry no key and are skipped. Keys such as `__proto__`
 * become ordinary own properties, never the object's prototype.
 */
export function decodeTxt(buffers: readonly Uint8Array[]): DecodedTxt {
  const strict = new TextDecoder('utf-8', { fatal: true });
  const lenient = new TextDecoder('utf-8');
  const txt: Record<string, string> = {};
  const duplicates = new Set<string>();
  let invalidUtf8 = false;
  for (const buffer of buffers) {
    try {
      strict.decode(buffer);
    } catch {
      invalidUtf8 = true;
    }
    const text = lenient.decode(buffer);
    const eq = text.indexOf('=');
    const key = asciiLower(eq === -1 ? text : text.slice(0, eq));
    if (key === '') continue;
    if (Object.prototype.hasOwnProperty.call(txt, key)) {
      duplicates.add(key);
      continue;
    }
    Object.defineProperty(txt, key, {
      value: eq === -1 ? '' : text.slice(eq + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return { txt, invalidUtf8, bytes: txtSize(buffers), duplicateKeys: [...duplicates] };
}

/** RFC 6763 keys are case-insensitive for ASCII letters only. */
function asciiLower(text: string): string {
  return text.replace(/[A-Z]/g, (c) => c.toLowerCase());
}
