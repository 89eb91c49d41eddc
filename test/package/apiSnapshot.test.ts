/**
 * The public API, pinned: the names src/index.ts exports at run time and the names (values and types)
 * the built dist/index.d.ts declares. Adding, renaming or dropping an export fails here, so a change
 * of the API shows as a diff of this file, reviewed on purpose. Reads dist/: run `npm run build`
 * first (scripts/test.sh does).
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const DECLARATIONS = join(ROOT, 'dist/index.d.ts');

/** What `import * as amf from 'amf-mesh'` holds at run time. */
const RUNTIME_EXPORTS = [
  'AfmLoadError',
  'AmfError',
  'ConfigError',
  'DEFAULT_CONFIG',
  'HandlerError',
  'TaskRejectedError',
  'VERSION',
  'loadAfmFile',
  'loadConfig',
  'readCredentials',
  'startAfmAgent',
  'startCoordinator',
  'startCoordinatorRuntime',
  'startWorker',
  'validateAfmFile',
];

/** The run-time exports and the types beside them, as a TypeScript user imports them. */
const DECLARED_EXPORTS = [
  ...RUNTIME_EXPORTS,
  'AfmDefinition',
  'AmfConfig',
  'AmfErrorCode',
  'ArtifactPart',
  'ChatMessage',
  'ConfigOverrides',
  'CoordinatorHttp',
  'CoordinatorRuntime',
  'FollowUpMessage',
  'HandlerResult',
  'LoadConfigOptions',
  'ResultArtifact',
  'RoleCredential',
  'RunningAgent',
  'RunningCoordinator',
  'RunningWorker',
  'StartAfmAgentOptions',
  'StartCoordinatorOptions',
  'StartWorkerOptions',
  'TaskContext',
  'TaskHandler',
  'TaskTools',
  'Usage',
  'WorkerHandler',
].sort();

/** Every name a module's declaration file exports, read by the TypeScript checker (re-exports followed). */
function declaredExports(file: string): string[] {
  const program = ts.createProgram([file], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const module = source && checker.getSymbolAtLocation(source);
  if (!module) throw new Error(`${file} declares no module`);
  return checker
    .getExportsOfModule(module)
    .map((symbol) => symbol.getName())
    .sort();
}

describe('the public API', () => {
  it('exports these values from src/index.ts', async () => {
    const api: Record<string, unknown> = await import('../../src/index.js');
    expect(Object.keys(api).sort()).toEqual(RUNTIME_EXPORTS);
  });

  it('declares these names in dist/index.d.ts', () => {
    if (!existsSync(DECLARATIONS))
      throw new Error('dist/index.d.ts is missing: run `npm run build` before this test');
    expect(declaredExports(DECLARATIONS)).toEqual(DECLARED_EXPORTS);
  }, 60_000);
});
