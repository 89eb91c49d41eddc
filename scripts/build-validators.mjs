// Build step after tsc: writes every generated ajv validator as standalone code next to the module
// that loads it, so nothing compiles a JSON schema at run time:
// - the configuration's (dist/config/configValidator.generated.cjs, see src/config/configValidator.ts);
// - the HTTP request bodies' (dist/http/bodyValidators.generated.cjs, see src/http/bodyValidator.ts).
import { writeFileSync } from 'node:fs';
import { configValidatorSource } from '../dist/config/configValidatorBuild.js';
import { bodyValidatorsSource } from '../dist/http/bodyValidatorBuild.js';
import { HTTP_BODY_SCHEMAS } from '../dist/edge/httpBodySchemas.js';

writeFileSync(
  new URL('../dist/config/configValidator.generated.cjs', import.meta.url),
  configValidatorSource(),
);
writeFileSync(
  new URL('../dist/http/bodyValidators.generated.cjs', import.meta.url),
  bodyValidatorsSource(HTTP_BODY_SCHEMAS),
);
