import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadHandler } from '../../src/cli/handlerLoader.js';

function moduleFile(source: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'amf-handler-'));
  const path = join(dir, 'handler.mjs');
  writeFileSync(path, source);
  return path;
}

describe('loadHandler', () => {
  it('keeps a module handler’s input schema and read-only flag', async () => {
    const path = moduleFile(`export default {
      name: 'lookup', description: 'Looks a word up', readOnly: true,
      inputSchema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
      handle: async (ctx) => ctx.input.word,
    };`);
    const handler = await loadHandler(path);
    expect(handler).toMatchObject({ name: 'lookup', readOnly: true, inputSchema: { required: ['word'] } });
  });

  it('does not mark a handler read-only unless it says so', async () => {
    const handler = await loadHandler(moduleFile('export default async (ctx) => ctx.text;'));
    expect(handler.readOnly).toBeUndefined();
    expect((await loadHandler('echo')).readOnly).toBe(true);
  });

  it('refuses an input schema that is not an object schema, naming the module', async () => {
    const path = moduleFile(`export default { inputSchema: { type: 'string' }, handle: async () => 'x' };`);
    await expect(loadHandler(path)).rejects.toThrow(/inputSchema must be a JSON Schema with type "object"/);
  });
});
