// The rogue agent as a separate OS process (issue 12): `node rogueProcess.mjs` reads an admitted
// agent's key file from its data dir, connects as that agent's own NATS user and attacks — a final
// for another agent's task, work of a tag it was not admitted for, publishes on coordinator-only
// subjects. Each must be refused (NATS permission violation or intake refusal) and warned naming
// the rogue, and the honest tasks must each end once, with the honest answer.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOrCreateAgentKey } from '../../src/identity/agentKey.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import {
  settledTerminalEvents,
  startTestMesh,
  type ObservedEvent,
  type TestMesh,
} from '../helpers/meshFixture.js';
import { gatedHandler } from '../helpers/gatedHandler.js';

const ROGUE_SCRIPT = fileURLToPath(new URL('./rogueProcess.mjs', import.meta.url));
const run = promisify(execFile);

const payloadOf = (e: ObservedEvent) => e.event.data.payload as Record<string, unknown>;

describe('a rogue agent in another OS process, with an admitted agent’s key file', () => {
  let mesh: TestMesh;
  let victim: RunningWorker;
  let rogue: RunningWorker;
  let rogueKeyFile: string;
  const gate = gatedHandler();

  beforeAll(async () => {
    mesh = await startTestMesh();
    // One task at a time: the second `secret` task stays in the work queue, unclaimed.
    victim = await mesh.startWorker('victim', ['secret'], gate.handler, { concurrency: 1 });
    // The rogue is an agent admitted for its own tag, whose key lives where `amf worker` keeps it.
    rogueKeyFile = join(mesh.config.dataDir, 'agents', 'rogue', 'agent.nkey');
    rogue = await startWorker({
      name: 'rogue',
      tags: ['rogue-tag'],
      handler: echoHandler,
      natsUrl: mesh.coordinator.natsUrl,
      join: mesh.coordinator.joinCredential,
      port: 0,
      heartbeatSeconds: 1,
      key: await loadOrCreateAgentKey(rogueKeyFile),
    });
    await mesh.waitFor(
      () => mesh.coordinator.registry.isLive(rogue.worker.agentId),
      10_000,
      'rogue admitted',
    );
  });
  afterAll(async () => {
    gate.release();
    await rogue?.close(2000);
    await mesh?.close();
  });

  it('is refused and warned on every attempt, and the honest tasks each end once', async () => {
    const rogueId = rogue.worker.agentId;
    const victimId = victim.worker.agentId;
    const first = mesh.coordinator.dispatcher.submit({ tag: 'secret', task: 'first', timeoutMs: 60_000 });
    const claim = await mesh.waitForEvent(
      (e) => e.subject === 'amf.task.claim' && payloadOf(e).agent_id === victimId,
      10_000,
      'the victim claims the first task',
    );
    const taskId = claim.event.amftaskid!;
    let announced: (taskId: string) => void = () => undefined;
    const announcedId = new Promise<string>((resolve) => (announced = resolve));
    const second = mesh.coordinator.dispatcher.submit({
      tag: 'secret',
      task: 'second',
      timeoutMs: 60_000,
      onAnnounced: (id) => announced(id),
    });
    const otherTaskId = await announcedId;

    const { stdout } = await run(
      process.execPath,
      [
        ROGUE_SCRIPT,
        JSON.stringify({
          natsUrl: mesh.coordinator.natsUrl,
          keyFile: rogueKeyFile,
          rogueId,
          victimId,
          victimUrl: victim.url,
          taskId,
          traceId: claim.event.amftraceid,
          otherTag: 'secret',
          otherTaskId,
        }),
      ],
      { timeout: 60_000 },
    );
    const attempts = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(attempts.map((a) => a.attempt)).toEqual([
      'connected',
      'forged_final_direct',
      'forged_final_seed_subject',
      'forged_final_core',
      'pull_other_tag',
      'claim_other_tag',
      'final_other_tag',
      'failed_final_other_tag',
      'coordinator_subjects',
      'done',
    ]);
    // Another process, the rogue agent's own NATS user (its key file is all it needed).
    expect(attempts[0]!.as).toBe(rogue.worker.key.publicKey);
    // The pull of another tag's work gets nothing: NATS refuses the consumer's API to this user.
    expect(attempts.find((a) => a.attempt === 'pull_other_tag')!.error).toBeDefined();
    // A forged direct final on its own subject is answered refused; the seed's form is closed to it.
    expect(attempts.find((a) => a.attempt === 'forged_final_direct')!.reply).toBe('{"decision":"refused"}');
    expect(attempts.find((a) => a.attempt === 'forged_final_seed_subject')!.error).toBeDefined();

    const warned = (reason: string, what: string, extra: (e: ObservedEvent) => boolean = () => true) =>
      mesh.waitForEvent(
        (e) =>
          e.subject === 'amf.policy.warning' &&
          payloadOf(e).reason === reason &&
          payloadOf(e).agent_id === rogueId &&
          extra(e),
        10_000,
        what,
      );
    // 1. The forged finals: refused at the direct final subject and the core subject (by NATS
    //    there, and by the task-event intake on the rogue's own subject).
    await warned(
      'forged_event',
      'forged direct final refused',
      (e) =>
        payloadOf(e).task_id === taskId &&
        String(payloadOf(e).message).includes('amf.result.final') &&
        String(payloadOf(e).message).includes('the direct final subject'),
    );
    await warned(
      'forged_event',
      'forged final on its own task-event subject refused',
      (e) =>
        (payloadOf(e).details as { intake?: string }).intake === 'task event intake' &&
        (payloadOf(e).details as { claimed_agent?: string }).claimed_agent === victimId,
    );
    // 2. Another tag's work: NATS refused the pull; the claim by task id is refused at intake.
    await warned('permission_violation', 'pull of another tag refused', (e) =>
      String(payloadOf(e).message).includes('workers_secret'),
    );
    await warned(
      'tag_not_admitted',
      'claim of another tag refused',
      (e) => payloadOf(e).task_id === otherTaskId && String(payloadOf(e).message).startsWith('claim'),
    );
    // Its own final for that unclaimed task, without a claim, is refused the same way.
    expect(attempts.find((a) => a.attempt === 'final_other_tag')!.reply).toBe('{"decision":"refused"}');
    await warned(
      'tag_not_admitted',
      'final of another tag refused',
      (e) => payloadOf(e).task_id === otherTaskId && String(payloadOf(e).message).startsWith('result'),
    );
    // The failed final on the canonical subject is refused too (the task is still answered below).
    await mesh.waitFor(
      () =>
        mesh.events.filter(
          (e) =>
            e.subject === 'amf.policy.warning' &&
            payloadOf(e).reason === 'tag_not_admitted' &&
            payloadOf(e).task_id === otherTaskId &&
            String(payloadOf(e).message).startsWith('result'),
        ).length >= 2,
      10_000,
      'failed final of another tag refused',
    );
    // 3. Coordinator-only subjects: NATS refused each publish, the coordinator reports it.
    //    And the shared task-event subjects, which only the coordinators record on.
    for (const subject of [
      'amf.task.cancel',
      'amf.task.announce.secret',
      'amf.policy.deny',
      'amf.task.claim',
      'amf.result.final',
    ])
      await warned(
        'permission_violation',
        `publish on ${subject} refused`,
        (e) => (payloadOf(e).details as { subject?: string }).subject === subject,
      );

    // Nothing the rogue did changed who holds the tasks.
    expect(mesh.coordinator.lifecycle.get(taskId)?.claimedBy).toBe(victimId);
    expect(mesh.coordinator.lifecycle.get(otherTaskId)?.claimedBy).toBeUndefined();
    gate.release();
    expect((await first).text).toBe('honest: first');
    expect((await second).text).toBe('honest: second');
    for (const [id, text] of [
      [taskId, 'honest: first'],
      [otherTaskId, 'honest: second'],
    ] as const) {
      const endings = (await settledTerminalEvents(mesh, id)).filter(
        (e) => e.event.data.auth_context.identity === mesh.coordinator.sender.identity,
      );
      expect(endings).toHaveLength(1);
      expect((payloadOf(endings[0]!).result as { text: string }).text).toBe(text);
    }
  }, 120_000);
});
