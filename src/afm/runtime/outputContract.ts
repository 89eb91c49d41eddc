/**
 * Signatures at run time: the input checked against `signature.input` before the model sees it, and
 * for a non-string `signature.output` the structured answer asked for (instruction in the system
 * prompt, plus `response_format` json_schema for OpenAI-compatible servers), parsed out of the
 * model's text and validated. Schemas are JSON Schema draft-07 as the AFM parser checks them.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { AmfError } from '../../errors.js';
import type { JsonSchema, StructuredOutputRequest } from '../../llm/types.js';

const ajv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true });
// Compiled once per schema object: definitions are frozen and reused for every turn.
const compiled = new WeakMap<object, ValidateFunction>();

/** Longest user message built from an input (a JSON input is sent pretty-printed). */
export const MAX_INPUT_CHARS = 200_000;

function validator(schema: JsonSchema, side: 'input' | 'output'): ValidateFunction {
  let fn = compiled.get(schema);
  if (!fn) {
    try {
      fn = ajv.compile(schema);
    } catch (err) {
      throw new AmfError(
        'INVALID_REQUEST',
        `signature.${side} is not a valid JSON Schema: ${(err as Error).message}`,
      );
    }
    compiled.set(schema, fn);
  }
  return fn;
}

/** ajv errors as one line: `/a must be number; (root) must have required property 'b'`. */
export function describeErrors(errors: readonly ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .slice(0, 10)
    .map((e) => `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`)
    .join('; ');
}

/** True when the schema asks for plain text: `type: string`, or no constraint at all (`{}`). */
export function isTextSchema(schema: JsonSchema | undefined): boolean {
  if (!schema) return true;
  if (schema.type === 'string') return true;
  return Object.keys(schema).every((k) => k === 'description' || k === 'title' || k === '$schema');
}

/**
 * Checks an input against `signature.input` and turns it into the user message: a string input under
 * a string signature is sent as is, anything else as pretty-printed JSON.
 */
export function inputToMessage(input: unknown, schema: JsonSchema | undefined): string {
  const effective = schema ?? { type: 'string' };
  const validate = validator(effective, 'input');
  if (!validate(input))
    throw new AmfError(
      'INVALID_REQUEST',
      `input does not match the agent's input signature: ${describeErrors(validate.errors)}`,
    );
  const text = typeof input === 'string' ? input : JSON.stringify(input, null, 2);
  if (text === undefined) throw new AmfError('INVALID_REQUEST', 'input must be a JSON value or a string');
  if (text.length > MAX_INPUT_CHARS)
    throw new AmfError('PAYLOAD_TOO_LARGE', `input of ${text.length} characters exceeds ${MAX_INPUT_CHARS}`);
  return text;
}

/** How a structured answer is asked for and read back. */
export interface OutputContract {
  /** False for text output: the answer is the model's text, streamed as it comes. */
  readonly structured: boolean;
  /** Appended to the system prompt (empty for text output). */
  readonly instruction: string;
  /** Sent to providers that support it natively (absent for text output). */
  readonly request?: StructuredOutputRequest;
  /** Parses and validates the model's text: `{ok: true, value}` or the reasons it failed. */
  parse(text: string): { ok: true; value: unknown } | { ok: false; reason: string };
}

/** Pulls a JSON value out of a model answer: bare, in a ```json fence, or between prose. */
export function extractJson(text: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  const trimmed = text.trim();
  const candidates: string[] = [trimmed];
  const fence = /```(?:json)?\s*\n?([\s\S]*?)```/i.exec(trimmed);
  if (fence?.[1]) candidates.push(fence[1].trim());
  const start = trimmed.search(/[[{]/);
  if (start >= 0) {
    const close = trimmed[start] === '{' ? '}' : ']';
    const end = trimmed.lastIndexOf(close);
    if (end > start) candidates.push(trimmed.slice(start, end + 1));
  }
  let lastError = 'the answer is empty';
  for (const candidate of candidates) {
    if (candidate === '') continue;
    try {
      return { ok: true, value: JSON.parse(candidate) as unknown };
    } catch (err) {
      lastError = `the answer is not JSON (${(err as Error).message})`;
    }
  }
  return { ok: false, reason: lastError };
}

/**
 * Builds the contract for a non-text output schema. Object schemas are requested as they are; any
 * other root (array, number, ...) is wrapped as `{"value": ...}` because json_schema response
 * formats want an object at the root. Either form is accepted back.
 */
export function outputContract(schema: JsonSchema): OutputContract {
  const validate = validator(schema, 'output');
  const wrapped = schema.type !== 'object';
  const requestSchema: JsonSchema = wrapped
    ? { type: 'object', properties: { value: schema }, required: ['value'], additionalProperties: false }
    : schema;
  const shown = JSON.stringify(schema, null, 2);
  const instruction = wrapped
    ? [
        '# Output format',
        'Reply with only a JSON object of the form {"value": ANSWER}, no prose and no code fences,',
        'where ANSWER validates against this JSON Schema:',
        shown,
      ].join('\n')
    : [
        '# Output format',
        'Reply with only a JSON value, no prose and no code fences, that validates against this JSON Schema:',
        shown,
      ].join('\n');
  return {
    structured: true,
    instruction,
    request: { name: 'agent_output', schema: requestSchema },
    parse(text) {
      const json = extractJson(text);
      if (!json.ok) return json;
      if (validate(json.value)) return json;
      const direct = describeErrors(validate.errors);
      if (wrapped && json.value && typeof json.value === 'object' && 'value' in json.value) {
        const inner = (json.value as { value: unknown }).value;
        if (validate(inner)) return { ok: true, value: inner };
        return {
          ok: false,
          reason: `the value does not match the output schema: ${describeErrors(validate.errors)}`,
        };
      }
      return { ok: false, reason: `the answer does not match the output schema: ${direct}` };
    },
  };
}

/**
 * The contract of a text output: the answer is the text; a schema with constraints beyond
 * `type: string` (maxLength, pattern, enum) is still checked.
 */
export function textContract(schema: JsonSchema | undefined): OutputContract {
  const validate = schema ? validator(schema, 'output') : undefined;
  return {
    structured: false,
    instruction: '',
    parse(text) {
      if (!validate || validate(text)) return { ok: true, value: text };
      return {
        ok: false,
        reason: `the answer does not match the output schema: ${describeErrors(validate.errors)}`,
      };
    },
  };
}

/** The contract for an output schema (absent = text). */
export function contractFor(schema: JsonSchema | undefined): OutputContract {
  return isTextSchema(schema) ? textContract(schema) : outputContract(schema!);
}

/** The text form of an output: strings as they are, anything else as JSON. */
export function outputText(output: unknown): string {
  return typeof output === 'string' ? output : JSON.stringify(output);
}
