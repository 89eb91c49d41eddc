// The precompiled configuration validator (the build's standalone code) must report exactly what the
// validator compiled at run time reports: same errors, same order, same schema nodes and values.
import { createRequire } from 'node:module';
import { Ajv, type ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import {
  CONFIG_AJV_OPTIONS,
  CONFIG_AJV_VOCABULARY,
  schemaFingerprint,
} from '../../src/config/configAjvOptions.js';
import { CONFIG_SCHEMA } from '../../src/config/configSchema.js';
import { configValidatorSource } from '../../src/config/configValidatorBuild.js';

const require = createRequire(import.meta.url);

/** Evaluates the generated CommonJS source as the build's .cjs file would be loaded. */
function loadGenerated(): ValidateFunction & { schema?: string } {
  const module = { exports: {} as unknown };
  new Function('module', 'exports', 'require', configValidatorSource())(module, module.exports, require);
  return module.exports as ValidateFunction & { schema?: string };
}

function compiledAtRunTime(): ValidateFunction {
  const ajv = new Ajv({ ...CONFIG_AJV_OPTIONS, code: { optimize: false } });
  ajv.addVocabulary([...CONFIG_AJV_VOCABULARY]);
  return ajv.compile(CONFIG_SCHEMA);
}

const SAMPLES: unknown[] = [
  {},
  { coordinator: { port: 8765, host: '127.0.0.1' }, log_level: 'debug' },
  { coordinator: { port: 'eighty', api_key: '' }, unknown_key: 1 },
  { mdns: { enabled: 'yes' }, tasks: { ttl_seconds: 0, max_retries: 1.5 } },
  { worker: { tags: ['a', 'a', 'b c'], name: '' } },
  {
    mcp: {
      servers: [
        { name: 'x', transport: 'http' },
        { name: 'Y!', transport: 'stdio', url: 'ftp://' },
      ],
    },
  },
  { a2a: { agents: [{ name: 'a' }, 'not a mapping'] }, nats: { url: 'nats://a b' } },
  [],
  'text',
];

describe('precompiled configuration validator', () => {
  it('records the schema it was built from', () => {
    expect(loadGenerated().schema).toBe(schemaFingerprint());
  });

  it('reports the same errors as the validator compiled at run time', () => {
    const generated = loadGenerated();
    const runtime = compiledAtRunTime();
    let failures = 0;
    for (const sample of SAMPLES) {
      const ok = runtime(sample);
      expect(generated(sample)).toBe(ok);
      if (!ok) failures++;
      expect(generated.errors ?? null).toEqual(runtime.errors ?? null);
    }
    expect(failures).toBeGreaterThanOrEqual(6);
  });
});
