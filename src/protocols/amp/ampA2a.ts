/**
 * AMP inside A2A: an AMP request travels in an A2A message as a data part (`{data: {amp: "1.0", ...}}`,
 * or `{kind: "data", data}` in A2A 0.3), as a text part whose text is the JSON of the request (the AMP
 * README's form), or in `message.metadata[AMP_EXTENSION_URI]`. The A2A server calls
 * `extractAmpMessage` on every incoming message and, when it finds one, routes by its intent.
 */
import { AMP_EXTENSION_URI, AMP_LIMITS, validateAmpMessage, type AmpValidation } from './ampMessage.js';

/** Largest text part parsed as a possible AMP request. */
const MAX_AMP_TEXT_BYTES = AMP_LIMITS.contextBytes + 16 * 1024;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function candidate(part: unknown): unknown {
  if (!isObject(part)) return undefined;
  if (isObject(part.data) && 'amp' in part.data) return part.data;
  if (typeof part.text === 'string') {
    const text = part.text.trim();
    if (!text.startsWith('{') || !text.includes('"amp"') || Buffer.byteLength(text) > MAX_AMP_TEXT_BYTES)
      return undefined;
    try {
      const value: unknown = JSON.parse(text);
      return isObject(value) && 'amp' in value ? value : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * The AMP request carried by an A2A message (any protocol version): undefined when it carries none,
 * else the validation result (a typed request, or the AMP error code and message to answer with).
 */
export function extractAmpMessage(a2aMessage: unknown, now: number = Date.now()): AmpValidation | undefined {
  if (!isObject(a2aMessage)) return undefined;
  const metadata = a2aMessage.metadata;
  if (isObject(metadata) && isObject(metadata[AMP_EXTENSION_URI]))
    return validateAmpMessage(metadata[AMP_EXTENSION_URI], now);
  const parts = Array.isArray(a2aMessage.parts) ? a2aMessage.parts.slice(0, 64) : [];
  for (const part of parts) {
    const value = candidate(part);
    if (value !== undefined) return validateAmpMessage(value, now);
  }
  return undefined;
}
