/**
 * The JSON schema of an AMP request (v1.0-draft §4.1) as the coordinator reads it. Properties are
 * listed in the order the reference implementations check them, and validation stops at the first
 * problem, so the first message is theirs (`Missing required field: <f>`, `Unsupported AMP
 * version`, `from.id is required`). Unknown fields stay allowed (the spec has extensions). What a
 * schema cannot say is checked in ampMessage.ts after this: an intent of blanks, a real date, the
 * ttl against the clock, the reply_to URL, the context's size.
 */
import type { BodySchema, BodySchemaNode } from '../../http/bodySchema.js';

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

/** `2026-03-18T14:30:00Z`, with optional seconds, fraction and offset. */
const ISO_8601 = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:?\\d{2})$';

/** An AMP request as the schema guarantees it (the wire's snake_case names). */
export interface AmpWireMessage {
  amp: '1.0';
  id: string;
  from: { id: string; name?: string; type?: string };
  to: string | string[];
  intent: string;
  timestamp: string;
  type?: AmpMessageType;
  context?: Record<string, unknown> | null;
  trust?: { level: TrustLevel; no_external_sends?: boolean; allowlist?: string[] } | null;
  reply_to?: string | null;
  sync?: boolean;
  ttl?: number | null;
  trace_id?: string | null;
}

const boundedId = (name: string): BodySchemaNode => ({
  type: 'string',
  minLength: 1,
  maxLength: AMP_LIMITS.idChars,
  'x-error': `${name} must be a non-empty string of at most ${AMP_LIMITS.idChars} characters`,
});

const FROM_ID_REQUIRED = 'from.id is required: "from" must be an object with an id';

export const AMP_MESSAGE_SCHEMA: BodySchema = {
  name: 'ampMessage',
  schema: {
    type: 'object',
    'x-error': 'an AMP message must be a JSON object',
    'x-missing': 'Missing required field: {param}',
    required: ['amp', 'id', 'from', 'to', 'intent', 'timestamp'],
    properties: {
      amp: { const: '1.0', 'x-error': 'Unsupported AMP version: {got} (expected "1.0")' },
      from: {
        type: 'object',
        'x-error': FROM_ID_REQUIRED,
        'x-missing': FROM_ID_REQUIRED,
        required: ['id'],
        properties: {
          id: boundedId('from.id'),
          name: {
            type: 'string',
            maxLength: AMP_LIMITS.idChars,
            'x-error': `from.name must be a string of at most ${AMP_LIMITS.idChars} characters`,
          },
          // The spec lists agent|router|human; the reference README itself sends "assistant", so any
          // short string is accepted: the type is informational.
          type: { type: 'string', maxLength: 64, 'x-error': 'from.type must be a short string' },
        },
      },
      id: boundedId('id'),
      to: {
        type: ['string', 'array'],
        minLength: 1,
        maxLength: AMP_LIMITS.idChars,
        minItems: 1,
        maxItems: AMP_LIMITS.recipients,
        'x-error': {
          type: `"to" must be a recipient id or a list of 1 to ${AMP_LIMITS.recipients} ids`,
          minItems: `"to" must be a recipient id or a list of 1 to ${AMP_LIMITS.recipients} ids`,
          maxItems: `"to" must be a recipient id or a list of 1 to ${AMP_LIMITS.recipients} ids`,
          minLength: `"to" entries must be non-empty strings of at most ${AMP_LIMITS.idChars} characters`,
          maxLength: `"to" entries must be non-empty strings of at most ${AMP_LIMITS.idChars} characters`,
        },
        items: {
          type: 'string',
          minLength: 1,
          maxLength: AMP_LIMITS.idChars,
          'x-error': `"to" entries must be non-empty strings of at most ${AMP_LIMITS.idChars} characters`,
        },
      },
      intent: {
        type: 'string',
        maxLength: AMP_LIMITS.intentChars,
        'x-error': {
          type: 'intent must be a string saying what you want done',
          maxLength: `intent is longer than ${AMP_LIMITS.intentChars} characters`,
        },
      },
      timestamp: {
        type: 'string',
        pattern: ISO_8601,
        'x-error': 'timestamp must be an ISO 8601 date-time such as 2026-03-18T14:30:00Z',
      },
      type: { enum: [...MESSAGE_TYPES], 'x-error': `type must be one of ${MESSAGE_TYPES.join(', ')}` },
      context: { type: ['object', 'null'], 'x-error': 'context must be an object' },
      trust: {
        type: ['object', 'null'],
        'x-error': '"trust" must be an object',
        'x-missing': `trust.level must be one of ${TRUST_LEVELS.join(', ')}`,
        required: ['level'],
        properties: {
          level: {
            enum: [...TRUST_LEVELS],
            'x-error': `trust.level must be one of ${TRUST_LEVELS.join(', ')}`,
          },
          no_external_sends: { type: 'boolean', 'x-error': 'trust.no_external_sends must be a boolean' },
          allowlist: {
            type: 'array',
            maxItems: AMP_LIMITS.allowlistEntries,
            'x-error': `trust.allowlist must be a list of at most ${AMP_LIMITS.allowlistEntries} non-empty strings`,
            items: {
              type: 'string',
              minLength: 1,
              maxLength: 256,
              'x-error': `trust.allowlist must be a list of at most ${AMP_LIMITS.allowlistEntries} non-empty strings`,
            },
          },
        },
      },
      reply_to: {
        type: ['string', 'null'],
        minLength: 1,
        maxLength: AMP_LIMITS.urlChars,
        'x-error': `reply_to must be an http(s) URL of at most ${AMP_LIMITS.urlChars} characters`,
      },
      sync: { type: 'boolean', 'x-error': 'sync must be a boolean' },
      ttl: {
        type: ['integer', 'null'],
        minimum: 1,
        maximum: AMP_LIMITS.maxTtlSeconds,
        'x-error': `ttl must be a whole number of seconds between 1 and ${AMP_LIMITS.maxTtlSeconds}`,
      },
      trace_id: { ...boundedId('trace_id'), type: ['string', 'null'] },
    },
  },
};
