/**
 * The layering of src/ (docs/architecture.md): an inner layer never imports an outer one, no two
 * folders import each other, directly or around a cycle, and no protocol adapter imports another
 * (what two adapters share sits in an inner layer, or is wired by apps/). Read from the import
 * statements themselves, so a new folder must be placed in LAYERS before it can be imported.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');

/** Folder (or root file) → layer, inner to outer. Keep in step with docs/architecture.md. */
const LAYERS: Readonly<Record<string, number>> = {
  'errors.ts': 0,
  'log.ts': 0,
  'version.ts': 0,
  util: 0,
  config: 0,
  events: 1,
  fabric: 2,
  net: 3,
  policy: 3,
  identity: 3,
  discovery: 3,
  watcher: 3,
  registry: 4,
  coordinator: 4,
  admission: 4,
  worker: 4,
  mcpClient: 4,
  a2aClient: 4,
  llm: 4,
  http: 5,
  'protocols/openai': 5,
  'protocols/mcp': 5,
  'protocols/a2a': 5,
  'protocols/amp': 5,
  'protocols/fabric': 5,
  afm: 5,
  edge: 5,
  apps: 6,
  cli: 7,
  'index.ts': 7,
};

/**
 * The unit an import belongs to: a root file, a protocols/* adapter, or a top-level folder. A
 * subfolder (coordinator/tasks/, protocols/mcp/worker/) belongs to its parent's unit and layer.
 */
function unitOf(file: string): string {
  const parts = relative(SRC, file).split('/');
  if (parts.length === 1) return parts[0]!.replace(/\.js$/, '.ts');
  if (parts[0] === 'protocols') return `protocols/${parts[1]}`;
  return parts[0]!;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g;

interface Edge {
  from: string;
  to: string;
  file: string;
}

function importEdges(): Edge[] {
  const edges: Edge[] = [];
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(file), (m[1] ?? m[2])!);
      const from = unitOf(file);
      const to = unitOf(target);
      if (from !== to) edges.push({ from, to, file: relative(SRC, file) });
    }
  }
  return edges;
}

/** Imports from one protocols/* adapter into another, as sentences. */
function adapterToAdapter(edges: Edge[]): string[] {
  return edges
    .filter((e) => e.from.startsWith('protocols/') && e.to.startsWith('protocols/'))
    .map((e) => `${e.file} (${e.from}) imports ${e.to}`);
}

/** The one file the Coordinator class lives in, as import edges name their source files. */
const COORDINATOR_CLASS = 'coordinator/coordinator.ts';
/** Where the Coordinator class may be imported: the composition roots and the core itself. */
const COORDINATOR_IMPORTERS = ['apps/', 'coordinator/'];

/** The path (relative to src/) of each file that imports `target`, a file relative to src/. */
function importersOf(target: string): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(SRC)) {
    for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const imported = relative(SRC, resolve(dirname(file), (m[1] ?? m[2])!)).replace(/\.js$/, '.ts');
      if (imported === target) found.push(relative(SRC, file));
    }
  }
  return found;
}

/**
 * Files that take the whole Coordinator though they are no composition root: the edge (protocol
 * adapters, http/, the operator routes) takes narrow ports (docs/architecture.md, "Ports").
 */
function coordinatorOutsideRoots(importers: readonly string[]): string[] {
  return importers.filter((f) => !COORDINATOR_IMPORTERS.some((allowed) => f.startsWith(allowed)));
}

/** Every folder cycle, as the list of units around it. */
function folderCycles(edges: Edge[]): string[][] {
  const next = new Map<string, Set<string>>();
  for (const e of edges) {
    if (!next.has(e.from)) next.set(e.from, new Set());
    next.get(e.from)!.add(e.to);
  }
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (unit: string): void => {
    state.set(unit, 'open');
    stack.push(unit);
    for (const to of next.get(unit) ?? []) {
      if (state.get(to) === 'open') cycles.push([...stack.slice(stack.indexOf(to)), to]);
      else if (!state.has(to)) visit(to);
    }
    stack.pop();
    state.set(unit, 'done');
  };
  for (const unit of next.keys()) if (!state.has(unit)) visit(unit);
  return cycles;
}

describe('the layers of src/', () => {
  const edges = importEdges();

  it('reads the imports (the check is not vacuous)', () => {
    expect(edges.length).toBeGreaterThan(100);
    expect(edges).toContainEqual(expect.objectContaining({ from: 'apps', to: 'worker' }));
  });

  it('counts a subfolder as part of its folder', () => {
    expect(unitOf(join(SRC, 'coordinator/tasks/lifecycle.ts'))).toBe('coordinator');
    expect(unitOf(join(SRC, 'protocols/mcp/worker/endpoint.ts'))).toBe('protocols/mcp');
    expect(unitOf(join(SRC, 'errors.js'))).toBe('errors.ts');
  });

  it('places every folder in a layer', () => {
    const units = new Set(sourceFiles(SRC).map(unitOf));
    expect([...units].filter((u) => LAYERS[u] === undefined)).toEqual([]);
  });

  it('never lets an inner layer import an outer one', () => {
    const outward = edges
      .filter((e) => (LAYERS[e.to] ?? Infinity) > (LAYERS[e.from] ?? -1))
      .map((e) => `${e.file} (${e.from}, layer ${LAYERS[e.from]}) imports ${e.to} (layer ${LAYERS[e.to]})`);
    expect(outward).toEqual([]);
  });

  it('never lets one protocol adapter import another', () => {
    expect(adapterToAdapter(edges)).toEqual([]);
  });

  it('has no folder cycle', () => {
    expect(folderCycles(edges).map((c) => c.join(' -> '))).toEqual([]);
  });

  it('lets only the composition roots and the core import the Coordinator class', () => {
    const importers = importersOf(COORDINATOR_CLASS);
    // Not vacuous: the roots do import it.
    expect(importers).toContain('apps/coordinatorApp.ts');
    expect(coordinatorOutsideRoots(importers)).toEqual([]);
  });

  it('finds an adapter, http/ or a routes folder that imports the Coordinator (the check can fail)', () => {
    const planted = [
      'protocols/openai/chatCompletions.ts',
      'http/httpKit.ts',
      'edge/coordinator/consoleRoutes.ts',
      'apps/coordinatorApp.ts',
      'coordinator/metrics.ts',
    ];
    expect(coordinatorOutsideRoots(planted)).toEqual([
      'protocols/openai/chatCompletions.ts',
      'http/httpKit.ts',
      'edge/coordinator/consoleRoutes.ts',
    ]);
  });

  it('keeps apps/ to composition roots: every file there exports a start function', () => {
    const apps = join(SRC, 'apps');
    const helpers = readdirSync(apps).filter(
      (name) => !/^export (async )?function start[A-Z]/m.test(readFileSync(join(apps, name), 'utf8')),
    );
    expect(helpers).toEqual([]);
  });

  it('finds a cycle and an outward import when there is one (the checks can fail)', () => {
    const planted: Edge[] = [
      { from: 'worker', to: 'coordinator', file: 'x' },
      { from: 'coordinator', to: 'worker', file: 'y' },
    ];
    expect(folderCycles(planted)).toHaveLength(1);
    expect(LAYERS['apps']! > LAYERS['worker']!).toBe(true);
  });

  it('finds an adapter importing another adapter, and leaves an adapter importing a runtime alone', () => {
    const planted: Edge[] = [
      { from: 'protocols/a2a', to: 'protocols/amp', file: 'protocols/a2a/x.ts' },
      { from: 'protocols/a2a', to: 'registry', file: 'protocols/a2a/y.ts' },
      { from: 'apps', to: 'protocols/amp', file: 'apps/z.ts' },
    ];
    expect(adapterToAdapter(planted)).toEqual(['protocols/a2a/x.ts (protocols/a2a) imports protocols/amp']);
  });
});
