/**
 * Public surface of the AFM format layer: load or validate an `.afm.md` / `.afm` file, and compile
 * webhook prompt templates. The runtime (src/afm/runtime) and interfaces (src/afm/interfaces) build
 * on these.
 */
export {
  loadAfmFile,
  validateAfmFile,
  parseAfm,
  MAX_AFM_FILE_BYTES,
  type AfmParseOptions,
} from './parseAfm.js';
export { compileWebhookTemplate } from './webhookTemplate.js';
export { AfmLoadError, WebhookTemplateError, type WebhookTemplateErrorReason } from './afmErrors.js';
export { secretEnvName, MAX_VARIABLE_FILE_BYTES } from './staticVariables.js';
export type * from './types.js';
export { AFM_INTERFACE_TYPES, DEFAULT_MAX_ITERATIONS } from './types.js';
