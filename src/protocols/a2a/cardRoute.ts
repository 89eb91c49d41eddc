/**
 * Serves an agent card: as the union of A2A 1.0 and 0.3 (agentCards.ts, unionAgentCard) unless the
 * request says `A2A-Version: 1.x`, which gets the strict 1.0 card. A2A 1.0 section 3.6 treats a
 * request without the header as 0.3, and 0.3 clients read only the 0.3 fields, so the union is
 * what an unversioned request gets; every current SDK fetches the card unversioned and reads the
 * union as 1.0.
 *
 * With HTTP caching (A2A 1.0 section 8.6.1): `Cache-Control` with a max-age, `Vary: A2A-Version`, a
 * strong `ETag` over the card's bytes, `Last-Modified` (when this server first served those bytes),
 * and 304 Not Modified for a matching `If-None-Match` (or, without it, `If-Modified-Since`). The
 * card changes as agents join and leave, so the max-age is short.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { unionAgentCard } from './agentCards.js';

/** How long a client may reuse a card without asking again. */
export const CARD_MAX_AGE_SECONDS = 60;

function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}

function matchesEtag(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  // Weak comparison (RFC 9110 13.1.2): W/"x" matches "x".
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

/**
 * True when the request names protocol 1.x in `A2A-Version`, as a header or (section 3.6.1) a query
 * parameter (Major.Minor; a bare major is taken too).
 */
export function wantsStrictCard(req: IncomingMessage): boolean {
  let version = req.headers['a2a-version'];
  if (version === undefined && req.url?.includes('?'))
    version = new URL(req.url, 'http://card.invalid').searchParams.get('A2A-Version') ?? undefined;
  return typeof version === 'string' && /^\s*1(\.\d+)?\s*$/.test(version);
}

/** When each variant of the card last changed (strict and union change together, but are two bodies). */
interface Variant {
  etag: string;
  /** Whole seconds: Last-Modified has no finer resolution, and If-Modified-Since compares seconds. */
  modifiedAt: number;
}

/** A GET handler for one card path; `build` makes the 1.0 card per request (skills and URLs change). */
export function cardRoute(
  build: () => Record<string, unknown>,
): (req: IncomingMessage, res: ServerResponse) => void {
  const variants: Record<'strict' | 'union', Variant> = {
    strict: { etag: '', modifiedAt: 0 },
    union: { etag: '', modifiedAt: 0 },
  };
  return (req, res) => {
    const strict = wantsStrictCard(req);
    const card = build();
    const body = JSON.stringify(strict ? card : unionAgentCard(card));
    const etag = etagOf(body);
    const variant = variants[strict ? 'strict' : 'union'];
    if (etag !== variant.etag) {
      variant.etag = etag;
      variant.modifiedAt = Math.floor(Date.now() / 1000) * 1000;
    }
    const headers = {
      'cache-control': `public, max-age=${CARD_MAX_AGE_SECONDS}`,
      vary: 'A2A-Version',
      etag,
      'last-modified': new Date(variant.modifiedAt).toUTCString(),
    };
    const ifNoneMatch = req.headers['if-none-match'];
    const ifModifiedSince = Date.parse(req.headers['if-modified-since'] ?? '');
    const notModified =
      ifNoneMatch !== undefined
        ? matchesEtag(ifNoneMatch, etag)
        : Number.isFinite(ifModifiedSince) && variant.modifiedAt <= ifModifiedSince;
    if (notModified) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    res.writeHead(200, {
      ...headers,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  };
}
