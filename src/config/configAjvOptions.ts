/**
 * The ajv options the configuration schema is compiled with, shared by the run-time fallback
 * (configValidator.ts) and the build step that precompiles it (configValidatorBuild.ts), so both
 * validators report exactly the same errors. Plain data: importing this does not load ajv.
 */
import type { Options } from 'ajv';
import { CONFIG_SCHEMA, SCHEMA_ANNOTATIONS } from './configSchema.js';

/**
 * verbose: errors carry the failing schema node (for x-expected) and the offending value.
 * strictRequired is off because the if/then rules require keys declared one level up.
 */
export const CONFIG_AJV_OPTIONS: Readonly<Options> = Object.freeze({
  allErrors: true,
  verbose: true,
  strict: true,
  strictRequired: false,
  allowUnionTypes: true,
});

/** Keywords of the schema that only annotate (messages), added as a vocabulary without code. */
export const CONFIG_AJV_VOCABULARY: readonly string[] = SCHEMA_ANNOTATIONS;

/** The schema as the precompiled validator records it, to notice a validator older than the schema. */
export function schemaFingerprint(): string {
  return JSON.stringify(CONFIG_SCHEMA);
}
