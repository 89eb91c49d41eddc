/**
 * The JSON schema of an OpenAI `POST /v1/chat/completions` body, as far as AMF reads it. It stays
 * open (`temperature`, `tools`… are accepted and ignored, as OpenAI-compatible servers do); what AMF
 * reads is typed and bounded. Model naming, "no live agent serves" and the size limit are checked in
 * chatCompletions.ts after this.
 */
import type { BodySchema } from '../../http/bodySchema.js';

/** The roles OpenAI defines (`developer` is read as `system`). */
export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const;
/** At most this many messages in one request (one task carries them all). */
export const MAX_CHAT_MESSAGES = 1000;
/** At most this many content parts in one message. */
export const MAX_CONTENT_PARTS = 1000;

/** A text part of a message's content (AMF takes no images or audio). */
export interface ChatTextPart {
  type: 'text';
  text: string;
}

/** A chat request as the schema guarantees it. */
export interface ChatCompletionBody {
  model: string;
  messages: Array<{ role: (typeof CHAT_ROLES)[number]; content?: string | ChatTextPart[] | null }>;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
}

export const CHAT_REQUEST_SCHEMA: BodySchema = {
  name: 'openaiChatRequest',
  schema: {
    type: 'object',
    'x-error': 'request body must be a JSON object',
    // OpenAI's own wording for a missing parameter.
    'x-missing': 'you must provide a {param} parameter',
    required: ['model', 'messages'],
    properties: {
      model: {
        type: 'string',
        minLength: 1,
        maxLength: 256,
        'x-expected': 'a model name of 1 to 256 characters (amf/<capability-tag>)',
      },
      messages: {
        type: 'array',
        minItems: 1,
        maxItems: MAX_CHAT_MESSAGES,
        'x-error': {
          type: '{param} must be a non-empty array',
          minItems: '{param} must be a non-empty array',
          maxItems: `{param} has more than ${MAX_CHAT_MESSAGES} entries`,
        },
        items: {
          type: 'object',
          'x-expected': 'an object with a role and a content',
          'x-missing': `{param} is required: one of ${CHAT_ROLES.join(', ')}`,
          required: ['role'],
          properties: {
            role: { enum: [...CHAT_ROLES], 'x-expected': `one of ${CHAT_ROLES.join(', ')}` },
            content: {
              type: ['string', 'array', 'null'],
              maxItems: MAX_CONTENT_PARTS,
              'x-error': {
                type: '{param} must be a string or an array of text parts',
                maxItems: `{param} has more than ${MAX_CONTENT_PARTS} parts`,
              },
              items: {
                type: 'object',
                'x-error': '{param} must be a text part ({"type":"text","text":"..."})',
                'x-missing':
                  '{param} is required: only text parts ({"type":"text","text":"..."}) are accepted',
                required: ['type', 'text'],
                properties: {
                  type: { const: 'text', 'x-expected': '"text" (only text parts are accepted)' },
                  text: { type: 'string', 'x-expected': 'a string' },
                },
              },
            },
          },
        },
      },
      stream: { type: ['boolean', 'null'], 'x-expected': 'a boolean' },
      stream_options: {
        type: ['object', 'null'],
        'x-expected': 'an object',
        properties: { include_usage: { type: 'boolean', 'x-expected': 'a boolean' } },
      },
    },
  },
};
