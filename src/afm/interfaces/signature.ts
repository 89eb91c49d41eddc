/**
 * An interface's input/output contract (`signature`, JSON Schema written in YAML): compiled once at
 * start, used at the HTTP edge to refuse bad input with a message that says what was wrong.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { AmfError } from '../../errors.js';
import type { JsonSchema } from '../types.js';

export interface SignatureSchemas {
  input?: JsonSchema;
  output?: JsonSchema;
}

/** A compiled signature. */
export interface CompiledSignature {
  input: JsonSchema;
  output: JsonSchema;
  /** Input is a plain string (text/plain accepted). */
  stringInput: boolean;
  /** Output is a plain string. */
  stringOutput: boolean;
  /** Throws INVALID_REQUEST when `value` does not match `signature.input`. */
  checkInput(value: unknown): void;
}

const STRING: JsonSchema = Object.freeze({ type: 'string' });
const ajv = new Ajv({ allErrors: true, strict: false });

function isString(schema: JsonSchema): boolean {
  return schema.type === 'string';
}

/** Compiles a signature; absent sides default to string (AFM 5.3.3). */
export function compileSignature(signature: SignatureSchemas | undefined): CompiledSignature {
  const input = signature?.input ?? STRING;
  const output = signature?.output ?? STRING;
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(input);
  } catch (err) {
    throw new AmfError(
      'INVALID_REQUEST',
      `signature.input is not a valid JSON Schema: ${(err as Error).message}`,
    );
  }
  return {
    input,
    output,
    stringInput: isString(input),
    stringOutput: isString(output),
    checkInput(value) {
      if (validate(value)) return;
      const problems = (validate.errors ?? [])
        .slice(0, 5)
        .map((e) => `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`);
      throw new AmfError('INVALID_REQUEST', `input does not match the signature: ${problems.join('; ')}`);
    },
  };
}

/**
 * The MCP tool arguments schema for a signature: an object input is used as is; any other input is
 * wrapped as `{input: <schema>}` (MCP tool arguments are always an object); a string is `{text}`.
 */
export function toolInputSchema(sig: CompiledSignature): {
  type: 'object';
  properties?: Record<string, unknown>;
  required?: string[];
} {
  if (sig.stringInput)
    return { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] };
  if (sig.input.type === 'object') return sig.input as { type: 'object' };
  return { type: 'object', properties: { input: sig.input }, required: ['input'] };
}
