/**
 * The package as a user gets it: `npm pack` of the built tree, unpacked into a fresh project's
 * node_modules, imported by name from JavaScript and type-checked from TypeScript. The package's
 * dependencies are linked from this checkout's node_modules (the tests run without network; npm's
 * own dependency install is not what is under test here).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

let dir: string;
let project: string;

beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist/index.js')))
    throw new Error('dist/index.js is missing: run `npm run build` before this test');
  dir = await mkdtemp(join(tmpdir(), 'amf-pack-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  const [packed] = JSON.parse(stdout) as Array<{ filename: string }>;
  project = join(dir, 'project');
  const modules = join(project, 'node_modules');
  await mkdir(join(modules, 'amf-mesh'), { recursive: true });
  await run('tar', [
    '-xzf',
    join(dir, packed!.filename),
    '-C',
    join(modules, 'amf-mesh'),
    '--strip-components=1',
  ]);
  for (const entry of await readdir(join(ROOT, 'node_modules'))) {
    if (entry.startsWith('.') || entry === 'amf-mesh') continue;
    await symlink(join(ROOT, 'node_modules', entry), join(modules, entry));
  }
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'uses-amf', type: 'module' }));
}, 120_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the packed amf-mesh package', () => {
  it('is imported by name from JavaScript with its named exports', async () => {
    await writeFile(
      join(project, 'use.mjs'),
      `import * as amf from 'amf-mesh';
import { loadConfig, HandlerError, AmfError } from 'amf-mesh';
const config = await loadConfig({ env: { HOME: process.cwd() }, flags: { dataDir: process.cwd() } });
const err = new HandlerError('bad_input', 'no');
console.log(JSON.stringify({
  exports: Object.keys(amf).sort(),
  port: config.coordinator.port,
  handlerError: err.reason,
  isAmfError: new AmfError('INVALID_REQUEST', 'x') instanceof Error,
}));
`,
    );
    const { stdout } = await run(process.execPath, ['use.mjs'], { cwd: project });
    const out = JSON.parse(stdout) as {
      exports: string[];
      port: number;
      handlerError: string;
      isAmfError: boolean;
    };
    for (const name of ['startCoordinator', 'startWorker', 'startAfmAgent', 'loadConfig', 'loadAfmFile'])
      expect(out.exports).toContain(name);
    expect(out.exports).toContain('HandlerError');
    expect(out.exports).toContain('AmfError');
    expect(out.exports).toContain('VERSION');
    expect(out.port).toBe(8765);
    expect(out.handlerError).toBe('bad_input');
    expect(out.isAmfError).toBe(true);
  });

  it('keeps its internals private: a deep import is refused by the exports map', async () => {
    await writeFile(join(project, 'deep.mjs'), `await import('amf-mesh/dist/cli/main.js');\n`);
    await expect(run(process.execPath, ['deep.mjs'], { cwd: project })).rejects.toMatchObject({
      stderr: expect.stringContaining('ERR_PACKAGE_PATH_NOT_EXPORTED'),
    });
  });

  it('carries declaration files: a typed handler compiles and a wrong one does not', async () => {
    const tsconfig = {
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        types: [],
        skipLibCheck: true,
      },
    };
    await writeFile(join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
    await writeFile(
      join(project, 'handler.ts'),
      `import { HandlerError, startWorker, type TaskContext, type WorkerHandler } from 'amf-mesh';
export const upper: WorkerHandler = {
  name: 'upper',
  description: 'Upper-cases the text',
  async handle(ctx: TaskContext) {
    if (ctx.text.length === 0) throw new HandlerError('empty', 'nothing to upper-case');
    ctx.progress('working', 50);
    return { text: ctx.text.toUpperCase(), confidence: 0.9 };
  },
};
export const start = () => startWorker({ name: 'u', tags: ['upper'], handler: upper, natsUrl: 'nats://127.0.0.1:4222', credential: { user: 'specialist', password: 'x' } });
`,
    );
    await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project });
    await writeFile(
      join(project, 'wrong.ts'),
      `import type { WorkerHandler } from 'amf-mesh';
export const bad: WorkerHandler = { name: 'b', description: 'd', handle: (ctx) => ({ text: ctx.notAField }) };
`,
    );
    const failed = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project }).then(
      () => undefined,
      (err: { stdout: string }) => err.stdout,
    );
    expect(failed).toContain("Property 'notAField' does not exist");
    // Two full tsc runs: half a minute each on a busy 2-core machine.
  }, 120_000);
});
