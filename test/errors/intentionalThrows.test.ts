/**
 * Every error AMF raises on purpose is an AmfError with a code (src/errors.ts), so the protocol edge
 * maps it by its code and never by its message. Read from the source text: a plain `new Error(` in
 * src/ fails here, thrown, rejected or handed to a callback alike.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');

/** Folders whose errors are being turned into AmfErrors separately; an entry goes when its folder is done. */
const PENDING: readonly string[] = [
  'coordinator',
  'apps',
  'protocols/amp',
  'protocols/a2a',
  'protocols/fabric',
  'worker',
];

/** Files (relative to src/) that may still create a plain Error, each with the reason. */
const ALLOWED: Readonly<Record<string, string>> = {};

const PLAIN_ERROR = /\bnew Error\(/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return PENDING.includes(relative(SRC, path)) ? [] : sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** `file:line` of every plain Error created in src/, outside PENDING and ALLOWED. */
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

  it('lists only files and folders that exist', () => {
    const missing = [...PENDING, ...Object.keys(ALLOWED)].filter((p) => {
      try {
        readdirSync(join(SRC, p));
        return false;
      } catch (err) {
        return (err as NodeJS.ErrnoException).code !== 'ENOTDIR';
      }
    });
    expect(missing).toEqual([]);
  });
});
