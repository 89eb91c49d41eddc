/**
 * Schema validation of AMF events and agent records at the edge. Every fabric event passes through
 * `validateEvent`, so the validators are compiled once at module load and a valid input costs one
 * call of the generated code; error strings are built only on failure.
 *
 * The schemas (schemas.ts) carry every rule, including the CloudEvents 1.0 MUSTs (specversion,
 * non-empty id and source, RFC 3339 time, extension attribute names and primitive values, no
 * `data_base64` beside `data`), so the published JSON files and this validator cannot disagree.
 */
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { AgentRecord } from './agentRecord.js';
import type { AnyAmfEvent } from './cloudEvent.js';
import { AGENT_RECORD_SCHEMA, EVENT_ENVELOPE_SCHEMA } from './schemas.js';

/** Outcome of validating untrusted input: the typed value, or every problem found. */
export type ValidationResult<T> = { ok: true; value: T } | { ok: false; errors: string[] };

// allowMatchingProperties: the known extensions also match the open extension pattern, on purpose
// (both apply). allowUnionTypes: extension values are string | integer | boolean. strictRequired
// is off because `not: {required: [...]}` and `then: {required: [...]}` name properties declared
// elsewhere in the schema.
const ajv = new Ajv2020({
  allErrors: true,
  strict: true,
  strictRequired: false,
  allowMatchingProperties: true,
  allowUnionTypes: true,
});
addFormats.default(ajv, { formats: ['uuid', 'uri', 'uri-reference'] });
// Our own date-time check: the ajv-formats one splits the string on every call (an allocation on
// the hot path) and accepts forms RFC 3339 does not (a space separator, a `+0100` offset).
ajv.addFormat('date-time', { type: 'string', validate: isRfc3339DateTime });

const checkEvent = ajv.compile<AnyAmfEvent>(EVENT_ENVELOPE_SCHEMA);
const checkAgentRecord = ajv.compile<AgentRecord>(AGENT_RECORD_SCHEMA);

const DATE_TIME_MESSAGE = 'must match format "date-time" (RFC 3339, e.g. 2024-01-31T12:00:00Z)';
const EXTENSION_VALUE_MESSAGE =
  'extension attribute values must be a string, a boolean or a 32-bit integer (CloudEvents type system)';
const EXTENSION_NAME_MESSAGE =
  'unknown attribute name: CloudEvents extension attribute names must match ^[a-z0-9]{1,20}$';

/**
 * Messages for the rules whose ajv wording would hide the reason, keyed by the failing keyword's
 * schema path. Paths under `#/patternProperties/` are handled apart (ajv escapes the pattern).
 */
const MESSAGES_BY_SCHEMA_PATH: ReadonlyMap<string, { path?: string; message: string }> = new Map([
  ['#/$defs/dateTime/format', { message: DATE_TIME_MESSAGE }],
  ['#/$defs/dateTime/pattern', { message: DATE_TIME_MESSAGE }],
  [
    '#/properties/data_base64/not',
    { message: 'binary data is not supported: AMF events carry a JSON object in "data"' },
  ],
  [
    '#/dependentSchemas/data_base64/not',
    {
      path: '/data_base64',
      message:
        'must not appear together with "data" (CloudEvents: an event has data or data_base64, not both)',
    },
  ],
  [
    '#/properties/amfschemaversion/pattern',
    {
      message:
        'must be a semantic version with major version 1 (e.g. "1.1.0"); another major version is a breaking change this reader does not understand',
    },
  ],
  [
    '#/then/required',
    {
      message:
        "must have required property 'mcp_endpoint' (protocols_supported lists an MCP protocol, LOCKED #1)",
    },
  ],
]);

/** Validates an AMF event envelope against schema 1.1.0; on failure lists every problem. */
export function validateEvent(input: unknown): ValidationResult<AnyAmfEvent> {
  if (checkEvent(input)) return { ok: true, value: input };
  return { ok: false, errors: formatErrors(checkEvent.errors, EXTENSION_NAME_MESSAGE) };
}

/** Validates an agent record against schema 1.1.0; on failure lists every problem. */
export function validateAgentRecord(input: unknown): ValidationResult<AgentRecord> {
  if (checkAgentRecord(input)) return { ok: true, value: input };
  return { ok: false, errors: formatErrors(checkAgentRecord.errors, undefined) };
}

/**
 * Turns ajv errors into `<JSON pointer>: <what is wrong>` lines. Several keywords can fail for one
 * cause (a bad date fails both its format and its pattern), so identical lines are merged.
 */
function formatErrors(
  errors: readonly ErrorObject[] | null | undefined,
  rootUnknownMessage: string | undefined,
): string[] {
  const lines = new Set<string>();
  for (const error of errors ?? []) {
    const line = formatError(error, rootUnknownMessage);
    if (line !== undefined) lines.add(line);
  }
  if (lines.size === 0) lines.add('/: invalid');
  return [...lines];
}

function formatError(error: ErrorObject, rootUnknownMessage: string | undefined): string | undefined {
  const path = error.instancePath === '' ? '/' : error.instancePath;
  const known = MESSAGES_BY_SCHEMA_PATH.get(error.schemaPath);
  if (known !== undefined) return `${known.path ?? path}: ${known.message}`;
  if (error.schemaPath.startsWith('#/patternProperties/')) return `${path}: ${EXTENSION_VALUE_MESSAGE}`;
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    // The failing `then` keyword is reported by itself; "must match then schema" adds nothing.
    case 'if':
      return undefined;
    case 'additionalProperties': {
      const name = String(params['additionalProperty']);
      const childPath = `${error.instancePath}/${escapePointerToken(name)}`;
      if (error.instancePath === '' && rootUnknownMessage !== undefined)
        return `${childPath}: ${rootUnknownMessage}`;
      return `${childPath}: is not an allowed property here`;
    }
    case 'enum': {
      const allowed = params['allowedValues'] as unknown[];
      return `${path}: must be one of ${allowed.map((value) => JSON.stringify(value)).join(', ')}`;
    }
    case 'const':
      return `${path}: must be equal to constant ${JSON.stringify(params['allowedValue'])}`;
    default:
      return `${path}: ${error.message ?? `failed "${error.keyword}"`}`;
  }
}

const RFC3339_SHAPE =
  /^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})$/;
const DAYS_IN_MONTH = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * RFC 3339 `date-time` (section 5.6) with calendar checks: month 1-12, the days of that month
 * (leap years included), hour 0-23, minute 0-59, second 0-59, or 60 for a leap second at 23:59 UTC.
 */
function isRfc3339DateTime(value: string): boolean {
  if (!RFC3339_SHAPE.test(value)) return false;
  const year = digitsAt(value, 0, 4);
  const month = digitsAt(value, 5, 2);
  const day = digitsAt(value, 8, 2);
  const hour = digitsAt(value, 11, 2);
  const minute = digitsAt(value, 14, 2);
  const second = digitsAt(value, 17, 2);
  if (month < 1 || month > 12 || day < 1) return false;
  const leapYear = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > (month === 2 && leapYear ? 29 : (DAYS_IN_MONTH[month] ?? 0))) return false;
  if (hour > 23 || minute > 59 || second > 60) return false;
  let offsetMinutes = 0;
  const zulu = value.charCodeAt(value.length - 1) | 0x20;
  if (zulu !== 0x7a) {
    const offsetHours = digitsAt(value, value.length - 5, 2);
    const offsetMins = digitsAt(value, value.length - 2, 2);
    if (offsetHours > 23 || offsetMins > 59) return false;
    const sign = value.charCodeAt(value.length - 6) === 0x2d ? -1 : 1;
    offsetMinutes = sign * (offsetHours * 60 + offsetMins);
  }
  if (second === 60) {
    const utcMinuteOfDay = (((hour * 60 + minute - offsetMinutes) % 1440) + 1440) % 1440;
    return utcMinuteOfDay === 23 * 60 + 59;
  }
  return true;
}

/** Reads `length` ASCII digits at `start` (the caller has matched the shape) without allocating. */
function digitsAt(value: string, start: number, length: number): number {
  let result = 0;
  for (let i = start; i < start + length; i++) result = result * 10 + (value.charCodeAt(i) - 0x30);
  return result;
}

/** RFC 6901: `~` and `/` inside a property name are escaped so the path stays unambiguous. */
function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}
