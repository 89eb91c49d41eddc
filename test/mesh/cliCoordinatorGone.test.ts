// Client commands whose coordinator goes away say so and exit non-zero (issue 33): `amf events`
// (before: it exited 0 without a word) and `amf send` while its answer streams (the coordinator
// ends the stream with an error chunk and [DONE]). The coordinator stops as `amf up` stops it.
// dist/ must be current: scripts/test.sh builds before the tests; by hand, `npm run build`.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanCliEnv, spawnAmf, type RunningCli } from '../helpers/amfCli.js';
import { gatedHandler } from '../helpers/gatedHandler.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('amf client commands when the coordinator stops', () => {
  let mesh: TestMesh;
  let home: string;
  const gate = gatedHandler();
  const spawned: RunningCli[] = [];

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js')))
      throw new Error('dist/ is missing: run `npm run build` (scripts/test.sh builds first)');
    home = await mkdtemp(join(tmpdir(), 'amf-cli-gone-'));
    mesh = await startTestMesh();
    await mesh.startWorker('held', ['held'], gate.handler);
  });
  afterAll(async () => {
    for (const cli of spawned) cli.child.kill('SIGKILL');
    gate.release();
    await mesh?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('amf events and a streaming amf send each name the stop and exit 1', async () => {
    const common = ['--coordinator', mesh.url, '--data-dir', mesh.config.dataDir];
    const events = spawnAmf(['events', ...common], cleanCliEnv(home));
    spawned.push(events);
    // The stream answers once it is subscribed, so the task sent after this is on it.
    await events.waitFor('stderr', /amf events: amf\.> from /);
    const send = spawnAmf(['send', '--tag', 'held', ...common, 'wait', 'for', 'me'], cleanCliEnv(home));
    spawned.push(send);
    // The task is running (held by its handler) and its stream is open; the events stream has it.
    await events.waitFor('stdout', /amf\.task\.claim\s/);
    await mesh.waitFor(() => mesh.coordinator.lifecycle.activeCount === 1, 10_000, 'the held task');

    await mesh.http.close();
    await mesh.coordinator.close();

    expect(await events.exited).toBe(1);
    expect(events.out.stderr).toMatch(
      /amf events: the coordinator at http:\/\/127\.0\.0\.1:\d+ went away \(it is stopping\)/,
    );
    expect(await send.exited).toBe(1);
    expect(send.out.stderr).toMatch(
      /amf send: the coordinator is stopping: the answer to task [0-9a-f-]+ was cut off/,
    );
  });
});
