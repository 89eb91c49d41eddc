// `amf agents disable <name>` and `amf agents enable <name>` against a running mesh (the built CLI,
// the operator key read from the data dir): the table shows the agent `disabled`, the registry holds
// it so, enable undoes it, and an unknown name exits 1 with the coordinator's 404.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { cleanCliEnv } from '../helpers/amfCli.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF_BIN = join(ROOT, 'bin/amf.js');

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

describe('amf agents disable / enable', () => {
  let mesh: TestMesh;
  let worker: RunningWorker;
  let home: string;

  function amf(...args: string[]): Promise<CliRun> {
    const all = [...args, '--coordinator', mesh.url, '--data-dir', mesh.config.dataDir];
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [AMF_BIN, ...all],
        { env: cleanCliEnv(home), timeout: 20_000 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
    });
  }

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js')))
      throw new Error('dist/ is missing: run `npm run build` (scripts/test.sh builds first)');
    home = await mkdtemp(join(tmpdir(), 'amf-cli-switch-'));
    mesh = await startTestMesh();
    worker = await mesh.startWorker('switch-cli', ['switch-cli'], echoHandler);
  }, 60_000);
  afterAll(async () => {
    await mesh?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('disables by short name, lists it disabled, and enables it again', async () => {
    const id = worker.worker.agentId;
    const off = await amf('agents', 'disable', 'switch-cli');
    expect(off.code, off.stderr).toBe(0);
    expect(off.stdout).toMatch(new RegExp(`^disabled ${id}: `));
    expect(mesh.coordinator.registry.isDisabled(id)).toBe(true);

    const again = await amf('agents', 'disable', 'switch-cli');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe(`${id} was disabled already\n`);

    const table = await amf('agents');
    expect(table.code, table.stderr).toBe(0);
    const row = table.stdout.split('\n').find((l) => l.includes(id));
    expect(row).toMatch(/^disabled\s/);

    const json = await amf('agents', '-o', 'json');
    const listed = (JSON.parse(json.stdout) as { agents: Array<Record<string, unknown>> }).agents.find(
      (a) => a.agent_id === id,
    );
    expect(listed).toMatchObject({ status: 'disabled', liveness: 'live', disabled: { by: 'operator' } });

    const on = await amf('agents', 'enable', 'switch-cli');
    expect(on.code, on.stderr).toBe(0);
    expect(on.stdout).toBe(`enabled ${id}: live, offered work again\n`);
    expect(mesh.coordinator.registry.isDisabled(id)).toBe(false);
    const result = await mesh.coordinator.dispatcher.submit({
      tag: 'switch-cli',
      task: 'back',
      timeoutMs: 20_000,
    });
    expect(result.text).toBe('back');
  });

  it('an unknown agent exits 1 with the 404', async () => {
    const run = await amf('agents', 'disable', 'nobody-here');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('HTTP 404');
    expect(run.stderr).toContain('nobody-here');
  });
});
