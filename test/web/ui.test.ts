// Parse-level checks of the self-contained browser UI served by the coordinator at GET /.
import { readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const file = fileURLToPath(new URL('../../src/web/index.html', import.meta.url));
const html = readFileSync(file, 'utf8');

describe('src/web/index.html', () => {
  it('exists and stays small', () => {
    expect(statSync(file).isFile()).toBe(true);
    expect(statSync(file).size).toBeLessThan(60 * 1024);
    expect(html.trimStart().toLowerCase().startsWith('<!doctype html>')).toBe(true);
  });

  it('uses the coordinator endpoints', () => {
    for (const path of ['/events', '/agents', '/v1/models', '/v1/chat/completions', '/health']) {
      expect(html).toContain(path);
    }
  });

  it('loads no external resources', () => {
    expect(html).not.toMatch(/\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?\/\//i);
    expect(html).not.toMatch(/<script[^>]*\bsrc\s*=/i);
    expect(html).not.toMatch(/<link[^>]*rel\s*=\s*["']?stylesheet/i);
    expect(html).not.toMatch(/@import\s/i);
    expect(html).not.toMatch(/url\(\s*["']?(?:https?:)?\/\//i);
  });

  it('never uses innerHTML/outerHTML/insertAdjacentHTML/document.write', () => {
    expect(html).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
  });

  it('has syntactically valid inline JavaScript', () => {
    const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1] ?? '');
    expect(scripts.length).toBeGreaterThan(0);
    for (const code of scripts) {
      // Compiles without running: throws SyntaxError on malformed code.
      expect(() => new Function(code)).not.toThrow();
    }
  });
});
