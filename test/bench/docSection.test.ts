/**
 * docs/benchmarks.md has two writers: bench/run.js regenerates the page, bench/taskPath.js owns its
 * top section "Task path against BullMQ". The section must survive a regeneration, be replaced (not
 * stacked) on every task-path run, and be written literally whatever it contains.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

interface DocSection {
  TASK_PATH_START: string;
  TASK_PATH_END: string;
  sectionOf(text: string): string;
  withSection(text: string, section: string): string;
  writeSection(file: string, body: string): void;
}

// bench/ is plain JavaScript without declarations: imported through a computed specifier.
const modulePath = new URL('../../bench/lib/docSection.js', import.meta.url).href;
const doc = (await import(modulePath)) as DocSection;
const dir = mkdtempSync(join(tmpdir(), 'amf-doc-section-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const section = (body: string): string => `${doc.TASK_PATH_START}\n\n${body}\n\n${doc.TASK_PATH_END}`;

describe('the task-path section of docs/benchmarks.md', () => {
  it('goes right under the page title, and a second run replaces it', () => {
    const file = join(dir, 'a.md');
    writeFileSync(file, '# Benchmarks\n\n<!-- generated -->\n\n## Old run\n\nnumbers\n');
    doc.writeSection(file, '## Task path against BullMQ\n\nfirst');
    doc.writeSection(file, '## Task path against BullMQ\n\nsecond');
    const text = readFileSync(file, 'utf8');
    expect(text.startsWith(`# Benchmarks\n\n${section('## Task path against BullMQ\n\nsecond')}\n`)).toBe(
      true,
    );
    expect(text).not.toContain('first');
    expect(text.split(doc.TASK_PATH_START)).toHaveLength(2);
    expect(text.endsWith('## Old run\n\nnumbers\n')).toBe(true);
  });

  it('is carried over when bench/run.js writes a new page, which has none', () => {
    const old = `# Benchmarks\n\n${section('kept table')}\n\n## AMF benchmark — old\n`;
    const regenerated = '# Benchmarks\n\n## AMF benchmark — new\n';
    const text = doc.withSection(regenerated, doc.sectionOf(old));
    expect(doc.sectionOf(text)).toBe(section('kept table'));
    expect(text).toContain('## AMF benchmark — new');
    expect(text).not.toContain('— old');
  });

  it('leaves a page without the section unchanged when there is none to carry', () => {
    const page = '# Benchmarks\n\nbody\n';
    expect(doc.sectionOf(page)).toBe('');
    expect(doc.withSection(page, '')).toBe(page);
  });

  it('writes replacement patterns ($&, $1) literally', () => {
    const page = `# Benchmarks\n\n${section('old')}\n`;
    const text = doc.withSection(page, section('costs $& and $1'));
    expect(doc.sectionOf(text)).toBe(section('costs $& and $1'));
  });
});
