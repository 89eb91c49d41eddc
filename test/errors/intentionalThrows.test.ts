/**
 * Every error AMF raises on purpose is an AmfError with a code (src/errors.ts), so the protocol edge
 * maps it by its code and never by its message. Read from the source text: a plain `new Error(` in
 * src/ fails here, thrown, rejected or handed to a callback alike.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');

/** Files (relative to src/) that may still create a plain Error, each with the reason. */
const ALLOWED: Readonly<Record<string, string>> = {
  // The socket's own time-out error, not a refusal: its retry loop stops on any AmfError (a
  // refusal it should not retry), and a callback that timed out must be retried.
  'protocols/amp/callbackDelivery.ts': 'a transport error the retry loop retries',
};

const PLAIN_ERROR = /\bnew Error\(/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** `file:line` of every plain Error created in src/, outside ALLOWED. */
function plainErrors(): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(SRC)) {
    const name = relative(SRC, file);
    if (ALLOWED[name] !== undefined) continue;
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(PLAIN_ERROR))
      found.push(`${name}:${text.slice(0, m.index).split('\n').length}`);
  }
  return found;
}

describe('intentional errors', () => {
  it('are AmfErrors: no plain `new Error(` in src/', () => {
    expect(plainErrors()).toEqual([]);
  });

  it('allows only files that exist', () => {
    const missing = Object.keys(ALLOWED).filter((p) => !existsSync(join(SRC, p)));
    expect(missing).toEqual([]);
  });
});
