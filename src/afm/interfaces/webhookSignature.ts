/**
 * HMAC verification of webhook deliveries (WebSub and GitHub style): `X-Hub-Signature-256:
 * sha256=<hex>` or `X-Hub-Signature: sha1|sha256|sha512=<hex>`, computed over the raw body with the
 * subscription secret. The comparison is constant time.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

const ALGORITHMS = { sha1: 'sha1', sha256: 'sha256', sha512: 'sha512' } as const;
type Algorithm = keyof typeof ALGORITHMS;

/** The outcome of a signature check; `reason` says what was wrong (never the expected value). */
export type SignatureCheck = { ok: true; algorithm: Algorithm } | { ok: false; reason: string };

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Computes the header value a sender puts on `body` (`sha256=<hex>`). */
export function signBody(secret: string, body: Buffer | string, algorithm: Algorithm = 'sha256'): string {
  return `${algorithm}=${createHmac(ALGORITHMS[algorithm], secret).update(body).digest('hex')}`;
}

/** Checks the signature headers of a delivery against `secret`. */
export function verifyWebhookSignature(
  secret: string,
  body: Buffer,
  headers: IncomingHttpHeaders,
): SignatureCheck {
  // The SHA-256 header wins when both are present: a downgrade to SHA-1 is not offered.
  const header = headerValue(headers, 'x-hub-signature-256') ?? headerValue(headers, 'x-hub-signature');
  if (header === undefined)
    return {
      ok: false,
      reason: 'missing signature: expected an X-Hub-Signature-256 (or X-Hub-Signature) header',
    };
  const match = /^(sha1|sha256|sha512)=([0-9a-fA-F]+)$/.exec(header.trim());
  if (!match)
    return { ok: false, reason: 'malformed signature: expected "sha256=<hex>" (or sha1=, sha512=)' };
  const algorithm = match[1] as Algorithm;
  const given = Buffer.from(match[2]!, 'hex');
  const expected = createHmac(ALGORITHMS[algorithm], secret).update(body).digest();
  // timingSafeEqual needs equal lengths; a wrong length is a mismatch, not an exception.
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return { ok: false, reason: 'signature mismatch: the body was not signed with the subscription secret' };
  return { ok: true, algorithm };
}
