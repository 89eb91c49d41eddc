/**
 * Events bound to the key that sent them. Two CloudEvents extension attributes travel with every
 * event an agent sends: `amfsigner` (its nkey public key) and `amfsignature` (Ed25519, base64url) over
 * the event's canonical form — the whole event without `amfsignature`, as JSON with object keys
 * sorted by UTF-16 code units at every level and no whitespace (RFC 8785 for the values AMF events
 * carry: strings, integers, booleans, null, arrays, objects). Both the envelope and the payload are
 * covered, so neither `agent_id` nor `auth_context.identity` can be changed without the key.
 */
import { verify as edVerify } from 'node:crypto';
import type { AgentKey } from './agentKey.js';
import { isNkeyUser, publicKeyObject } from './nkeyPublic.js';

/**
 * A final result is the worker's words whoever relays it: the worker also signs its payload alone
 * (`amfresultsig`, with its key in `amfresultsigner`), and a coordinator that relays the final as the
 * task's canonical one copies both, so every reader can check the answer against the worker's key.
 */
export const RESULT_SIGNER_ATTRIBUTE = 'amfresultsigner';
export const RESULT_SIGNATURE_ATTRIBUTE = 'amfresultsig';
const RESULT_DOMAIN = 'amf.result.final\n';

/** Extension attribute holding the signer's nkey public key. */
export const SIGNER_ATTRIBUTE = 'amfsigner';
/** Extension attribute holding the signature. */
export const SIGNATURE_ATTRIBUTE = 'amfsignature';

const encoder = new TextEncoder();
/** An Ed25519 signature is 64 bytes: 86 base64url characters. */
const SIGNATURE_PATTERN = /^[A-Za-z0-9_-]{86}$/;

/** The canonical JSON text of `value` (sorted keys, no whitespace). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** The bytes that are signed: the event without its signature, in canonical form. */
export function signedBytes(event: object): Uint8Array {
  const rest: Record<string, unknown> = { ...(event as Record<string, unknown>) };
  delete rest[SIGNATURE_ATTRIBUTE];
  return encoder.encode(canonicalJson(rest));
}

/** Stamps `event` with the signer and the signature (in place; returns it). */
export function signEvent<E extends object>(event: E, key: AgentKey): E {
  const target = event as Record<string, unknown>;
  delete target[SIGNATURE_ATTRIBUTE];
  target[SIGNER_ATTRIBUTE] = key.publicKey;
  target[SIGNATURE_ATTRIBUTE] = key.sign(signedBytes(event));
  return event;
}

function resultBytes(event: object): Uint8Array {
  const payload = (event as { data?: { payload?: unknown } }).data?.payload;
  return encoder.encode(RESULT_DOMAIN + canonicalJson(payload ?? null));
}

/** Adds the result signature to a final (before {@link signEvent}, which then covers it too). */
export function signResult<E extends object>(event: E, key: AgentKey): E {
  const target = event as Record<string, unknown>;
  target[RESULT_SIGNER_ATTRIBUTE] = key.publicKey;
  target[RESULT_SIGNATURE_ATTRIBUTE] = key.sign(resultBytes(event));
  return event;
}

/** Copies the worker's result signature onto a relayed final (its payload must be the same). */
export function carryResultSignature<E extends object>(from: object, to: E): E {
  const source = from as Record<string, unknown>;
  const target = to as Record<string, unknown>;
  for (const attribute of [RESULT_SIGNER_ATTRIBUTE, RESULT_SIGNATURE_ATTRIBUTE]) {
    const value = source[attribute];
    if (typeof value === 'string') target[attribute] = value;
  }
  return to;
}

/** Checks the result signature of a (possibly relayed) final against the key it names. */
export function checkResultSignature(event: object): SignatureCheck {
  const e = event as Record<string, unknown>;
  return checkSignature(e[RESULT_SIGNER_ATTRIBUTE], e[RESULT_SIGNATURE_ATTRIBUTE], () => resultBytes(event));
}

/** What a signature check found. */
export type SignatureCheck =
  | { ok: true; signer: string }
  | { ok: false; reason: 'unsigned' | 'malformed_signature' | 'bad_signature'; signer?: string };

/**
 * Checks the event's signature against the key it names (`amfsigner`). Whether that key is the one
 * bound to the agent the event speaks for is the caller's question (see the coordinator's
 * eventAuthenticity.ts); this only says whether the named key really signed these bytes.
 */
export function checkEventSignature(event: object): SignatureCheck {
  const e = event as Record<string, unknown>;
  return checkSignature(e[SIGNER_ATTRIBUTE], e[SIGNATURE_ATTRIBUTE], () => signedBytes(event));
}

/** One check for both signatures: well-formed signer and signature, then Ed25519 over `bytes()`. */
function checkSignature(signer: unknown, signature: unknown, bytes: () => Uint8Array): SignatureCheck {
  if (signer === undefined && signature === undefined) return { ok: false, reason: 'unsigned' };
  if (
    typeof signer !== 'string' ||
    !isNkeyUser(signer) ||
    typeof signature !== 'string' ||
    !SIGNATURE_PATTERN.test(signature)
  )
    return {
      ok: false,
      reason: 'malformed_signature',
      ...(typeof signer === 'string' ? { signer: signer.slice(0, 64) } : {}),
    };
  const valid = edVerify(null, bytes(), publicKeyObject(signer), Buffer.from(signature, 'base64url'));
  return valid ? { ok: true, signer } : { ok: false, reason: 'bad_signature', signer };
}
