// File-level checks of the console served by the coordinator (src/web): small, self-contained, no
// HTML strings, and every module it imports is shipped. test/web/console.test.ts drives it in Chromium.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const web = fileURLToPath(new URL('../../src/web', import.meta.url));
const html = readFileSync(join(web, 'index.html'), 'utf8');
const assets = readdirSync(join(web, 'console'));
const code = new Map(assets.map((name) => [name, readFileSync(join(web, 'console', name), 'utf8')]));
const scripts = [...code].filter(([name]) => name.endsWith('.js'));

describe('src/web (the console)', () => {
  it('is a small page with its own stylesheet and one module entry point', () => {
    expect(html.trimStart().toLowerCase().startsWith('<!doctype html>')).toBe(true);
    expect(html).toContain('<link rel="stylesheet" href="/console/console.css" />');
    expect(html).toContain('<script type="module" src="/console/app.js"></script>');
    let total = 0;
    for (const name of assets) {
      const size = statSync(join(web, 'console', name)).size;
      expect(size, name).toBeLessThan(40 * 1024);
      total += size;
    }
    expect(total).toBeLessThan(200 * 1024);
  });

  it('uses the coordinator endpoints', () => {
    const all = [...code.values()].join('\n');
    for (const path of [
      '/events?subject=',
      '/events/history',
      '/agents',
      '/admissions',
      '/audit',
      '/tools',
      '/mcp',
      '/tasks/',
      '/v1/models',
      '/v1/chat/completions',
      '/health',
    ])
      expect(all).toContain(path);
  });

  it('loads nothing from another origin and has no inline script or style', () => {
    for (const text of [html, ...code.values()]) {
      expect(text).not.toMatch(/\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?\/\//i);
      expect(text).not.toMatch(/@import\s/i);
      expect(text).not.toMatch(/url\(\s*["']?(?:https?:)?\/\//i);
      expect(text).not.toMatch(/fetch\(\s*['"`]https?:/);
    }
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
    expect(html).not.toMatch(/<style|\sstyle=/i);
    for (const [name, text] of scripts) expect(text, name).not.toMatch(/\bstyle:\s*'/);
  });

  it('never builds HTML from strings', () => {
    for (const [name, text] of scripts)
      expect(text, name).not.toMatch(
        /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/,
      );
  });

  it('imports only modules it ships', () => {
    for (const [name, text] of scripts) {
      for (const m of text.matchAll(/from '\.\/([a-z-]+\.js)'/g))
        expect(assets, `${name} imports ${m[1]}`).toContain(m[1]);
    }
    expect(scripts.map(([n]) => n)).toContain('app.js');
  });
});
