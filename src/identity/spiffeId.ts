/**
 * SPIFFE IDs (the SPIFFE-ID standard): `spiffe://<trust domain>/<path>`, trust domain of lowercase
 * letters, digits, `.`, `-`, `_`; path segments of letters, digits, `.`, `-`, `_`, never `.` or `..`
 * alone; no query, fragment, port or user info; at most 2048 bytes.
 */
const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
const SEGMENT = /^[A-Za-z0-9._-]+$/;
const MAX_ID_BYTES = 2048;

/** A parsed SPIFFE ID. */
export interface SpiffeId {
  readonly trustDomain: string;
  /** `''` or `/seg/seg`. */
  readonly path: string;
  readonly id: string;
}

/** Parses a SPIFFE ID; undefined when `value` is not one. */
export function parseSpiffeId(value: unknown): SpiffeId | undefined {
  if (typeof value !== 'string' || value.length > MAX_ID_BYTES || !value.startsWith('spiffe://'))
    return undefined;
  const rest = value.slice('spiffe://'.length);
  const slash = rest.indexOf('/');
  const trustDomain = slash === -1 ? rest : rest.slice(0, slash);
  const path = slash === -1 ? '' : rest.slice(slash);
  if (!trustDomain || !TRUST_DOMAIN.test(trustDomain)) return undefined;
  if (path !== '') {
    const segments = path.slice(1).split('/');
    for (const s of segments) if (!SEGMENT.test(s) || s === '.' || s === '..') return undefined;
  }
  return { trustDomain, path, id: value };
}

/** True when `value` is a SPIFFE ID. */
export function isSpiffeId(value: unknown): value is string {
  return parseSpiffeId(value) !== undefined;
}

/** `spiffe://example.org` or `example.org` (as JWT bundle maps key them) → `example.org`. */
export function trustDomainName(key: string): string {
  return key.startsWith('spiffe://') ? key.slice('spiffe://'.length).replace(/\/$/, '') : key;
}
