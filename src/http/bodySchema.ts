/**
 * What a JSON schema of an HTTP request body is made of here, and the ajv options every body schema
 * is compiled with (by the build step, bodyValidatorBuild.ts, and by the run-time fallback,
 * bodyValidator.ts, alike, so both report the same errors). Plain data: importing this does not
 * load ajv.
 *
 * A body schema is draft-07 JSON schema, as the configuration's is, plus three annotations that
 * only carry words for error messages (they generate no code):
 * - `x-expected`: the phrase after "must be" ("`messages[0].role` must be one of …");
 * - `x-error`: the whole message, for one keyword or all (`{param}` and `{got}` are filled in);
 * - `x-missing`: on an object, the message when one of its required properties is absent.
 */
import type { Options } from 'ajv';

/** One schema node, loosely typed: enough to read its annotations back from an ajv error. */
export interface BodySchemaNode {
  type?: string | readonly string[];
  properties?: Readonly<Record<string, BodySchemaNode>>;
  items?: BodySchemaNode;
  'x-expected'?: string;
  'x-error'?: string | Readonly<Record<string, string>>;
  'x-missing'?: string;
  [keyword: string]: unknown;
}

/** A named body schema: `name` is its export in the generated module and its `$id`. */
export interface BodySchema {
  readonly name: string;
  readonly schema: BodySchemaNode;
}

/** The annotation keywords, registered with ajv as a vocabulary without code. */
export const BODY_SCHEMA_ANNOTATIONS: readonly string[] = ['x-expected', 'x-error', 'x-missing'];

/**
 * allErrors off: one error names the parameter to fix, and validation stops at the first, so an
 * oversized array is refused by its maxItems before any of its items is looked at.
 * verbose: errors carry their schema node (for the annotations) and the offending value.
 */
export const BODY_AJV_OPTIONS: Readonly<Options> = Object.freeze({
  allErrors: false,
  verbose: true,
  strict: true,
  allowUnionTypes: true,
});

/** The `$id` a body schema is compiled under. */
export function bodySchemaId(name: string): string {
  return `urn:amf:http-body:${name}`;
}

/** The schema as the precompiled module records it, to notice a module older than the schema. */
export function bodySchemaFingerprint(body: BodySchema): string {
  return JSON.stringify(body.schema);
}
