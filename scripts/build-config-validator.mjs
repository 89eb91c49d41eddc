// Build step after tsc: writes the configuration validator as standalone code next to the compiled
// configuration module (dist/config/configValidator.generated.cjs), see src/config/configValidator.ts.
import { writeFileSync } from 'node:fs';
import { configValidatorSource } from '../dist/config/configValidatorBuild.js';

const out = new URL('../dist/config/configValidator.generated.cjs', import.meta.url);
writeFileSync(out, configValidatorSource());
