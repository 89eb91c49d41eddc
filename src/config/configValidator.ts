/**
 * The configuration schema's validator: the one precompiled by the build (dist/config/
 * configValidator.generated.cjs, scripts/build-validators.mjs) when it was built from the
 * current schema, else compiled here once per process. Compiling the schema at start was half of
 * `amf agents`' CPU (issue 14); ajv itself is only loaded for the fallback.
 */
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import { CONFIG_AJV_OPTIONS, CONFIG_AJV_VOCABULARY, schemaFingerprint } from './configAjvOptions.js';
import { CONFIG_SCHEMA } from './configSchema.js';

const require = createRequire(import.meta.url);

let compiled: ValidateFunction | undefined;

/** The validator of CONFIG_SCHEMA (built once per process). */
export function configValidator(): ValidateFunction {
  compiled ??= precompiled() ?? compileNow();
  return compiled;
}

type Precompiled = ValidateFunction & { schema?: string };

function precompiled(): ValidateFunction | undefined {
  let validate: Precompiled;
  try {
    validate = require('./configValidator.generated.cjs') as Precompiled;
  } catch {
    return undefined; // not built (tests run the sources): compile instead
  }
  // One built from an older schema (tsc run without the build step) is not used.
  return validate.schema === schemaFingerprint() ? validate : undefined;
}

function compileNow(): ValidateFunction {
  const { Ajv } = require('ajv') as typeof import('ajv');
  // The fallback compiles once per process: compiling fast matters more than running fast.
  const ajv = new Ajv({ ...CONFIG_AJV_OPTIONS, code: { optimize: false } });
  ajv.addVocabulary([...CONFIG_AJV_VOCABULARY]);
  return ajv.compile(CONFIG_SCHEMA);
}
