/**
 * Serves an agent card with HTTP caching (A2A 1.0 section 8.6.1): `Cache-Control` with a max-age,
 * a strong `ETag` over the card's bytes, `Last-Modified` (when this server first served those
 * bytes), and 304 Not Modified for a matching `If-None-Match` (or, without it, `If-Modified-Since`).
 * The card changes as agents join and leave, so the max-age is short.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

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

/** A GET handler for one card path; `build` makes the card per request (skills and URLs change). */
export function cardRoute(
  build: () => Record<string, unknown>,
): (req: IncomingMessage, res: ServerResponse) => void {
  let lastEtag = '';
  // Whole seconds: Last-Modified has no finer resolution, and If-Modified-Since compares seconds.
  let modifiedAt = 0;
  return (req, res) => {
    const body = JSON.stringify(build());
    const etag = etagOf(body);
    if (etag !== lastEtag) {
      lastEtag = etag;
      modifiedAt = Math.floor(Date.now() / 1000) * 1000;
    }
    const headers = {
      'cache-control': `public, max-age=${CARD_MAX_AGE_SECONDS}`,
      etag,
      'last-modified': new Date(modifiedAt).toUTCString(),
    };
    const ifNoneMatch = req.headers['if-none-match'];
    const ifModifiedSince = Date.parse(req.headers['if-modified-since'] ?? '');
    const notModified =
      ifNoneMatch !== undefined
        ? matchesEtag(ifNoneMatch, etag)
        : Number.isFinite(ifModifiedSince) && modifiedAt <= ifModifiedSince;
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
