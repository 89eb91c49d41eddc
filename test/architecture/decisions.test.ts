/**
 * Every decision number that code, policies, schemas, scripts or docs cite ("docs/decisions.md #7",
 * "LOCKED #7", "decision #7", "decisions #3a/#3b") has its entry in docs/decisions.md (a heading
 * "## #7: ..."), so no citation points nowhere.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SEARCHED = [
  'src',
  'test',
  'scripts',
  'policies',
  'schemas',
  'docs',
  'bench',
  'bin',
  'examples',
  'README.md',
];
const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.cache', 'results']);
const TEXT_FILE = /\.(ts|mts|js|mjs|cjs|rego|json|md|sh)$/;
const CITATION = /(?:LOCKED|[Dd]ecisions?|decisions\.md)\s+#(\d+[a-z]?)((?:\/#\d+[a-z]?)*)/g;

function filesUnder(path: string): string[] {
  let entries;
  try {
    entries = readdirSync(path, { withFileTypes: true });
  } catch {
    return TEXT_FILE.test(path) ? [path] : [];
  }
  return entries.flatMap((entry) => {
    if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) ? [] : filesUnder(join(path, entry.name));
    return TEXT_FILE.test(entry.name) ? [join(path, entry.name)] : [];
  });
}

/** The decision numbers cited in `text`. */
function citedIn(text: string): string[] {
  return [...text.matchAll(CITATION)].flatMap((match) => [
    match[1] ?? '',
    ...(match[2] ?? '').split('/#').filter((part) => part !== ''),
  ]);
}

function documentedNumbers(): Set<string> {
  const page = readFileSync(resolve(ROOT, 'docs/decisions.md'), 'utf8');
  return new Set([...page.matchAll(/^## #(\d+[a-z]?): /gm)].map((match) => match[1] ?? ''));
}

describe('docs/decisions.md', () => {
  it('reads every form of citation', () => {
    expect(citedIn('(LOCKED #1) decision #18, decisions #3a/#3b/#7 and docs/decisions.md #17')).toEqual([
      '1',
      '18',
      '3a',
      '3b',
      '7',
      '17',
    ]);
  });

  it('has an entry for every decision number cited in the repository', () => {
    const documented = documentedNumbers();
    const citations = new Map<string, string[]>();
    for (const file of SEARCHED.flatMap((path) => filesUnder(resolve(ROOT, path)))) {
      for (const number of citedIn(readFileSync(file, 'utf8'))) {
        citations.set(number, [...(citations.get(number) ?? []), relative(ROOT, file)]);
      }
    }
    // The code cites a dozen decisions; finding none would mean the search itself broke.
    expect(citations.size).toBeGreaterThanOrEqual(10);
    const unresolved = [...citations].filter(([number]) => !documented.has(number));
    expect(unresolved.map(([number, files]) => `#${number} in ${[...new Set(files)].join(', ')}`)).toEqual(
      [],
    );
  });
});
