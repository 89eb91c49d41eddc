/**
 * AMP (Agent Message Protocol, v1.0-draft) messages: the request and response shapes, validation of
 * incoming requests with the spec's statuses and error codes, and the response builder. Validation
 * goes further than the reference libraries (which only check that six keys exist): every field the
 * coordinator reads is type-checked and bounded by its JSON schema (ampMessageSchema.ts), then checked
 * here for what a schema cannot say, so the rest of AMF works with trusted values.
 */
import { randomBytes } from 'node:crypto';
import { AmfError } from '../../errors.js';
import { bodyValidator } from '../../http/bodyValidator.js';
import type { AmpErrorCode } from '../../http/wireErrors.js';
import {
  AMP_LIMITS,
  AMP_MESSAGE_SCHEMA,
  MESSAGE_TYPES,
  TRUST_LEVELS,
  type AmpMessageType,
  type AmpWireMessage,
  type TrustLevel,
} from './ampMessageSchema.js';

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

export { AMP_LIMITS, MESSAGE_TYPES, TRUST_LEVELS, type AmpMessageType, type TrustLevel };

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

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
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

function parseReplyTo(v: string): string {
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

const checkAmpBody = bodyValidator<AmpWireMessage>(AMP_MESSAGE_SCHEMA);

/**
 * Validates an incoming AMP request. The six required keys are checked first and in the reference
 * order, with the reference messages (`Missing required field: <f>`, `Unsupported AMP version`,
 * `from.id is required`); an empty intent is `intent_unclear`; a message whose `timestamp + ttl`
 * lies in the past is `expired`.
 */
export function validateAmpMessage(value: unknown, now: number = Date.now()): AmpValidation {
  const inReplyTo =
    isObject(value) &&
    typeof value.id === 'string' &&
    value.id.length > 0 &&
    value.id.length <= AMP_LIMITS.idChars
      ? value.id
      : null;
  try {
    // The structure, types and bounds (ampMessageSchema.ts), then what a schema cannot say.
    const checked = checkAmpBody(value);
    if (!checked.ok) fail(checked.problem.message);
    const v = checked.value;
    if (v.intent.trim() === '')
      fail('intent is empty: say in words what you want to accomplish', 'intent_unclear');
    const sent = Date.parse(v.timestamp);
    if (Number.isNaN(sent)) fail('timestamp is not a real date');
    const from: AmpSender = { id: v.from.id };
    if (v.from.name) from.name = v.from.name;
    if (v.from.type !== undefined) from.type = v.from.type;
    const message: AmpRequest = {
      amp: AMP_VERSION,
      id: v.id,
      from,
      to: Array.isArray(v.to) ? v.to : [v.to],
      intent: v.intent.trim(),
      type: v.type ?? 'query',
      timestamp: v.timestamp,
    };
    if (v.context !== undefined && v.context !== null) {
      if (Buffer.byteLength(JSON.stringify(v.context)) > AMP_LIMITS.contextBytes)
        fail(`context is larger than ${AMP_LIMITS.contextBytes} bytes`);
      message.context = v.context;
    }
    if (v.trust !== undefined && v.trust !== null)
      message.trust = {
        level: v.trust.level,
        noExternalSends: v.trust.no_external_sends === true,
        ...(v.trust.allowlist !== undefined ? { allowlist: v.trust.allowlist } : {}),
      };
    if (v.reply_to !== undefined && v.reply_to !== null) message.replyTo = parseReplyTo(v.reply_to);
    if (v.sync !== undefined) message.sync = v.sync;
    if (v.ttl !== undefined && v.ttl !== null) {
      message.ttl = v.ttl;
      if (sent + v.ttl * 1000 < now)
        fail(`the message expired: sent ${v.timestamp} with a ttl of ${v.ttl} s`, 'expired');
    }
    if (v.trace_id !== undefined && v.trace_id !== null) message.traceId = v.trace_id;
    return { ok: true, message };
  } catch (err) {
    if (err instanceof Invalid) return { ok: false, code: err.ampCode, message: err.message, inReplyTo };
    throw err;
  }
}
