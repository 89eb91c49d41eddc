/**
 * JSON schemas of the Fabric endpoint's bodies: the `POST /mcp/call` request `{name, arguments,
 * trace?, stream?}`, and the arguments of `fabric.call`. Both stay open: a tool's arguments are the
 * tool's to judge, and clients add fields. The trace object is read by fabricTrace.ts (it also comes
 * from a header); the capability being served, the agent's state and the task's size limit (a
 * configuration value) are checked in fabricCall.ts after this.
 */
import { CAPABILITY_TAG_PATTERN } from '../../events/subjects.js';
import type { BodySchema, BodySchemaNode } from '../../http/bodySchema.js';

/** A Fabric request as the schema guarantees it. */
export interface FabricRequestBody {
  name: string;
  arguments?: Record<string, unknown> | null;
  trace?: unknown;
  stream?: boolean | null;
}

/** `fabric.call`'s arguments as the schema guarantees them. */
export interface FabricCallArguments {
  agent_id: string;
  capability: string;
  task: string;
  context?: Record<string, unknown> | null;
  timeout_ms?: number;
}

export const FABRIC_REQUEST_SCHEMA: BodySchema = {
  name: 'fabricRequest',
  schema: {
    type: 'object',
    'x-error': 'a Fabric request must be a JSON object {name, arguments}',
    required: ['name'],
    properties: {
      name: {
        type: 'string',
        minLength: 1,
        maxLength: 256,
        'x-error': 'name is required: "fabric.call" or "fabric.tool.<category>.<name>"',
      },
      arguments: { type: ['object', 'null'], 'x-error': 'arguments must be a JSON object' },
      stream: { type: ['boolean', 'null'], 'x-error': 'stream must be a boolean' },
    },
    'x-missing': 'name is required: "fabric.call" or "fabric.tool.<category>.<name>"',
  },
};

const NON_EMPTY = '{param} is required: a non-empty string';

/** A string with something besides blanks in it, of at most `max` characters if given. */
const requiredText = (max?: number): BodySchemaNode => ({
  type: 'string',
  pattern: '\\S',
  ...(max !== undefined ? { maxLength: max } : {}),
  'x-error': {
    type: NON_EMPTY,
    pattern: NON_EMPTY,
    ...(max !== undefined ? { maxLength: `{param} is longer than ${max} characters` } : {}),
  },
});

export const FABRIC_CALL_ARGUMENTS_SCHEMA: BodySchema = {
  name: 'fabricCallArguments',
  schema: {
    type: 'object',
    'x-missing': NON_EMPTY,
    required: ['agent_id', 'capability', 'task'],
    properties: {
      agent_id: requiredText(256),
      capability: {
        type: 'string',
        minLength: 1,
        maxLength: 64,
        pattern: CAPABILITY_TAG_PATTERN.source,
        'x-error': {
          type: NON_EMPTY,
          minLength: NON_EMPTY,
          maxLength: '{param} is longer than 64 characters',
          pattern: '{param} must be a capability tag ([a-z0-9-]+)',
        },
      },
      // Its bound is the configuration's tasks.max_task_bytes, checked in fabricCall.ts.
      task: requiredText(),
      context: { type: ['object', 'null'], 'x-error': '{param} must be an object' },
      timeout_ms: {
        type: 'integer',
        minimum: 1000,
        maximum: 300_000,
        'x-error': '{param} must be a whole number from 1000 to 300000',
      },
    },
  },
};
