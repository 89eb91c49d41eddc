/**
 * AMP (Agent Message Protocol, v1.0-draft) messages: the request and response shapes, validation of
 * incoming requests with the spec's statuses and error codes, and the response builder. Validation
 * goes further than the reference libraries (which only check that six keys exist): every field the
 * coordinator reads is type-checked and bounded here, so the rest of AMF works with trusted values.
 */
import { randomBytes } from 'node:crypto';
import { AmfError } from '../../errors.js';
import type { AmpErrorCode } from '../../http/wireErrors.js';

/** The version string every AMP message carries. */
export const AMP_VERSION = '1.0';
/** The URI that names the AMP extension in A2A agent cards (`capabilities.extensions[].uri`). */
export const AMP_EXTENSION_URI = 'https://github.com/laufferw/amp-protocol/blob/main/SPEC.md';

/** Response statuses (spec §5). */
export const AMP_STATUSES = ['ok', 'partial', 'deferred', 'refused', 'error'] as const;
export type AmpStatus = (typeof AMP_STATUSES)[number];

/**
 * Error codes: the spec's table (§5) first, then the ones AMF adds where the table has no entry
 * (the reference implementations use `invalid_message` and `not_found` the same way).
 */
export type { AmpErrorCode };

export const MESSAGE_TYPES = [
  'query',
  'delegate',
  'collaborate',
  'discover',
  'route',
  'notify',
  'negotiate',
] as const;
export type AmpMessageType = (typeof MESSAGE_TYPES)[number];
export const TRUST_LEVELS = ['read-only', 'read-write', 'full'] as const;
export type TrustLevel = (typeof TRUST_LEVELS)[number];

/** Bounds on what one message may carry (the hub caps intent at 2000 characters too). */
export const AMP_LIMITS = {
  idChars: 256,
  intentChars: 2000,
  recipients: 16,
  contextBytes: 64 * 1024,
  urlChars: 2048,
  allowlistEntries: 64,
  maxTtlSeconds: 86_400,
} as const;

export interface AmpSender {
  id: string;
  name?: string;
  type?: string;
}

export interface AmpTrust {
  level: TrustLevel;
  noExternalSends: boolean;
  allowlist?: string[];
}

/** A validated AMP request. */
export interface AmpRequest {
  amp: '1.0';
  id: string;
  from: AmpSender;
  to: string[];
  intent: string;
  type: AmpMessageType;
  context?: Record<string, unknown>;
  /** Absent when the sender set no restriction. */
  trust?: AmpTrust;
  replyTo?: string;
  /** Explicit `sync` as sent (absent = the coordinator answers synchronously unless `reply_to`). */
  sync?: boolean;
  ttl?: number;
  traceId?: string;
  timestamp: string;
}

export interface AmpUncertainty {
  note: string;
  recommend?: string;
}

/** An AMP response as sent on the wire. */
export interface AmpResponse {
  amp: '1.0';
  id: string;
  in_reply_to: string | null;
  from: { id: string; name?: string };
  status: AmpStatus;
  confidence?: number;
  result?: unknown;
  uncertainty?: AmpUncertainty;
  error?: { code: AmpErrorCode; message: string };
  trace_id?: string;
  timestamp: string;
}

/** Result of validating a request: the typed message, or the error response to send. */
export type AmpValidation =
  | { ok: true; message: AmpRequest }
  | { ok: false; code: AmpErrorCode; message: string; inReplyTo: string | null };

/** A fresh message id in the reference implementations' style (`msg_` + 12 characters). */
export function ampMessageId(): string {
  return `msg_${randomBytes(6).toString('hex')}`;
}

/** Builds a response; optional fields appear only when given (as the reference builder does). */
export function makeAmpResponse(fields: {
  inReplyTo: string | null;
  fromId: string;
  fromName?: string;
  status: AmpStatus;
  result?: unknown;
  confidence?: number;
  uncertainty?: AmpUncertainty;
  error?: { code: AmpErrorCode; message: string };
  traceId?: string;
}): AmpResponse {
  return {
    amp: AMP_VERSION,
    id: ampMessageId(),
    in_reply_to: fields.inReplyTo,
    from: { id: fields.fromId, ...(fields.fromName ? { name: fields.fromName } : {}) },
    status: fields.status,
    ...(fields.confidence !== undefined ? { confidence: fields.confidence } : {}),
    ...(fields.result !== undefined ? { result: fields.result } : {}),
    ...(fields.uncertainty ? { uncertainty: fields.uncertainty } : {}),
    ...(fields.error ? { error: fields.error } : {}),
    ...(fields.traceId ? { trace_id: fields.traceId } : {}),
    timestamp: new Date().toISOString(),
  };
}

/** An `error` (or `refused`) response without a request to answer, e.g. from the HTTP guards. */
export function ampErrorResponse(
  code: AmpErrorCode,
  message: string,
  fromId = 'amf-coordinator',
  inReplyTo: string | null = null,
  status: 'error' | 'refused' = 'error',
): AmpResponse {
  return makeAmpResponse({ inReplyTo, fromId, status, error: { code, message } });
}

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function boundedString(v: unknown, max: number): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= max;
}

/** A message that fails validation: an INVALID_REQUEST whose AMP code the response carries. */
class Invalid extends AmfError {
  constructor(
    readonly ampCode: AmpErrorCode,
    message: string,
  ) {
    super('INVALID_REQUEST', message);
    this.name = 'AmpValidationError';
  }
}

function fail(message: string, code: AmpErrorCode = 'invalid_message'): never {
  throw new Invalid(code, message);
}

function parseFrom(v: unknown): AmpSender {
  if (!isObject(v) || v.id === undefined) fail('from.id is required: "from" must be an object with an id');
  if (!boundedString(v.id, AMP_LIMITS.idChars))
    fail(`from.id must be a non-empty string of at most ${AMP_LIMITS.idChars} characters`);
  const from: AmpSender = { id: v.id };
  if (v.name !== undefined) {
    if (typeof v.name !== 'string' || v.name.length > AMP_LIMITS.idChars)
      fail(`from.name must be a string of at most ${AMP_LIMITS.idChars} characters`);
    if (v.name) from.name = v.name;
  }
  if (v.type !== undefined) {
    // The spec lists agent|router|human; the reference README itself sends "assistant", so any short
    // string is accepted: the type is informational.
    if (typeof v.type !== 'string' || v.type.length > 64) fail('from.type must be a short string');
    from.type = v.type;
  }
  return from;
}

function parseTo(v: unknown): string[] {
  const list = Array.isArray(v) ? v : [v];
  if (list.length === 0 || list.length > AMP_LIMITS.recipients)
    fail(`"to" must be a recipient id or a list of 1 to ${AMP_LIMITS.recipients} ids`);
  for (const id of list)
    if (!boundedString(id, AMP_LIMITS.idChars))
      fail(`"to" entries must be non-empty strings of at most ${AMP_LIMITS.idChars} characters`);
  return list as string[];
}

function parseTrust(v: unknown): AmpTrust {
  if (!isObject(v)) fail('"trust" must be an object');
  if (!(TRUST_LEVELS as readonly unknown[]).includes(v.level))
    fail(`trust.level must be one of ${TRUST_LEVELS.join(', ')}`);
  if (v.no_external_sends !== undefined && typeof v.no_external_sends !== 'boolean')
    fail('trust.no_external_sends must be a boolean');
  const trust: AmpTrust = { level: v.level as TrustLevel, noExternalSends: v.no_external_sends === true };
  if (v.allowlist !== undefined) {
    if (
      !Array.isArray(v.allowlist) ||
      v.allowlist.length > AMP_LIMITS.allowlistEntries ||
      !v.allowlist.every((a) => boundedString(a, 256))
    )
      fail(`trust.allowlist must be a list of at most ${AMP_LIMITS.allowlistEntries} non-empty strings`);
    trust.allowlist = v.allowlist as string[];
  }
  return trust;
}

function parseReplyTo(v: unknown): string {
  if (!boundedString(v, AMP_LIMITS.urlChars))
    fail(`reply_to must be an http(s) URL of at most ${AMP_LIMITS.urlChars} characters`);
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    fail('reply_to is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') fail('reply_to must be an http(s) URL');
  if (url.username || url.password) fail('reply_to must not carry credentials');
  return url.href;
}

/**
 * Validates an incoming AMP request. The six required keys are checked first and in the reference
 * order, with the reference messages (`Missing required field: <f>`, `Unsupported AMP version`,
 * `from.id is required`); an empty intent is `intent_unclear`; a message whose `timestamp + ttl`
 * lies in the past is `expired`.
 */
export function validateAmpMessage(value: unknown, now: number = Date.now()): AmpValidation {
  const inReplyTo = isObject(value) && boundedString(value.id, AMP_LIMITS.idChars) ? value.id : null;
  try {
    if (!isObject(value)) fail('an AMP message must be a JSON object');
    for (const field of ['amp', 'id', 'from', 'to', 'intent', 'timestamp'])
      if (!(field in value)) fail(`Missing required field: ${field}`);
    if (value.amp !== AMP_VERSION)
      fail(`Unsupported AMP version: ${JSON.stringify(value.amp)?.slice(0, 40)} (expected "1.0")`);
    const from = parseFrom(value.from);
    if (!boundedString(value.id, AMP_LIMITS.idChars))
      fail(`id must be a non-empty string of at most ${AMP_LIMITS.idChars} characters`);
    const to = parseTo(value.to);
    if (typeof value.intent !== 'string') fail('intent must be a string saying what you want done');
    if (value.intent.length > AMP_LIMITS.intentChars)
      fail(`intent is longer than ${AMP_LIMITS.intentChars} characters`);
    if (value.intent.trim() === '')
      fail('intent is empty: say in words what you want to accomplish', 'intent_unclear');
    if (typeof value.timestamp !== 'string' || !ISO_8601.test(value.timestamp))
      fail('timestamp must be an ISO 8601 date-time such as 2026-03-18T14:30:00Z');
    const sent = Date.parse(value.timestamp);
    if (Number.isNaN(sent)) fail('timestamp is not a real date');
    let type: AmpMessageType = 'query';
    if (value.type !== undefined) {
      if (!(MESSAGE_TYPES as readonly unknown[]).includes(value.type))
        fail(`type must be one of ${MESSAGE_TYPES.join(', ')}`);
      type = value.type as AmpMessageType;
    }
    const message: AmpRequest = {
      amp: AMP_VERSION,
      id: value.id,
      from,
      to,
      intent: value.intent.trim(),
      type,
      timestamp: value.timestamp,
    };
    if (value.context !== undefined && value.context !== null) {
      if (!isObject(value.context)) fail('context must be an object');
      if (Buffer.byteLength(JSON.stringify(value.context)) > AMP_LIMITS.contextBytes)
        fail(`context is larger than ${AMP_LIMITS.contextBytes} bytes`);
      message.context = value.context;
    }
    if (value.trust !== undefined && value.trust !== null) message.trust = parseTrust(value.trust);
    if (value.reply_to !== undefined && value.reply_to !== null)
      message.replyTo = parseReplyTo(value.reply_to);
    if (value.sync !== undefined) {
      if (typeof value.sync !== 'boolean') fail('sync must be a boolean');
      message.sync = value.sync;
    }
    if (value.ttl !== undefined && value.ttl !== null) {
      if (
        typeof value.ttl !== 'number' ||
        !Number.isInteger(value.ttl) ||
        value.ttl < 1 ||
        value.ttl > AMP_LIMITS.maxTtlSeconds
      )
        fail(`ttl must be a whole number of seconds between 1 and ${AMP_LIMITS.maxTtlSeconds}`);
      message.ttl = value.ttl;
      if (sent + value.ttl * 1000 < now)
        fail(`the message expired: sent ${value.timestamp} with a ttl of ${value.ttl} s`, 'expired');
    }
    if (value.trace_id !== undefined && value.trace_id !== null) {
      if (!boundedString(value.trace_id, AMP_LIMITS.idChars))
        fail(`trace_id must be a non-empty string of at most ${AMP_LIMITS.idChars} characters`);
      message.traceId = value.trace_id;
    }
    return { ok: true, message };
  } catch (err) {
    if (err instanceof Invalid) return { ok: false, code: err.ampCode, message: err.message, inReplyTo };
    throw err;
  }
}
