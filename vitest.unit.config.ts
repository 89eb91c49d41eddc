// `npm run test:unit`: the suite's settings, over the files of test/unitTests.ts only.
import { defineConfig } from 'vitest/config';
import suite from './vitest.config.js';
import { UNIT_TEST_FILES } from './test/unitTests.js';

export default defineConfig({ test: { ...suite.test, include: [...UNIT_TEST_FILES] } });
