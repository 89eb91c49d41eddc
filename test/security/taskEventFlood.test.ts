// Task events are bound to their connection and bounded (issue 29, M4 and Low): an admitted agent,
// from its own NATS connection (its own credential, as an attacker holding it would), tries to
// - speak for another agent with unsigned claims and progress: refused, the warning names the
//   connection's real agent (never "sender unknown", never the victim);
// - flood claims, progress and partials: NATS refuses them on the shared subjects, and on its own
//   subject the coordinator records only what fits its quota, so the results and warnings the
//   history held before are all still there (the history is small enough that the flood would have
//   pushed them out), and the flood is warned quota_exceeded naming it;
// - flood stored finals: beyond its quota they are dropped, warned naming it, and deleted, so the
//   results stream does not fill with them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JetStreamManager } from '@nats-io/jetstream';
import { createEvent, type AmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { agentResultSubject, taskEventSubject } from '../../src/fabric/agentUsers.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { EVENTS_STREAM, RESULTS_STREAM } from '../../src/fabric/jetstream.js';
import { signEvent } from '../../src/identity/eventSignature.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { gatedHandler } from '../helpers/gatedHandler.js';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';

const MiB = 1024 * 1024;
const EVENTS_PER_MINUTE = 12;
const BYTES_PER_MINUTE = MiB / 2;
const FLOOD = 40;
const BLOB_BYTES = 100_000;

/** The refusals of an event as not its sender's: none of them may name the victim. */
const FORGERY_REASONS = new Set(['forged_event', 'unsigned_event', 'bad_signature', 'identity_mismatch']);

function payloadOf(e: ObservedEvent): Record<string, unknown> {
  return e.event.data.payload as Record<string, unknown>;
}

/** Every stored message of `stream`, by sequence, with its subject and event id. */
async function storedIds(jsm: JetStreamManager, stream: string): Promise<Map<number, string>> {
  const { state } = await jsm.streams.info(stream);
  const stored = new Map<number, string>();
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
    const msg = await jsm.streams.getMessage(stream, { seq }).catch(() => null);
    if (msg) stored.set(seq, `${msg.subject} ${msg.json<AmfEvent>().id}`);
  }
  return stored;
}

describe('an agent that forges and floods task events from its own connection', () => {
  let mesh: TestMesh;
  let victim: RunningWorker;
  let rogue: RunningWorker;
  let hoarder: RunningWorker;
  const gate = gatedHandler();

  beforeAll(async () => {
    mesh = await startTestMesh({
      config: {
        // Small enough that 40 events of 100 kB would have pushed every earlier event out.
        history: { maxBytes: 2 * MiB },
        taskEvents: { agentEventsPerMinute: EVENTS_PER_MINUTE, agentBytesPerMinute: BYTES_PER_MINUTE },
      },
    });
    victim = await mesh.startWorker('victim', ['secret'], gate.handler);
    rogue = await mesh.startWorker('flooder', ['flood'], echoHandler);
    hoarder = await mesh.startWorker('hoarder', ['hoard'], echoHandler);
  }, 60_000);
  afterAll(async () => {
    gate.release();
    await mesh?.close();
  });

  const senderOf = (w: RunningWorker): EventSender => ({
    identity: w.worker.agentId,
    source: w.url,
    role: 'specialist',
    trustDomain: 'local',
  });
  const warnedAbout = (
    agent: RunningWorker,
    reason: string,
    what: string,
    extra: (e: ObservedEvent) => boolean = () => true,
  ) =>
    mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        payloadOf(e).reason === reason &&
        payloadOf(e).agent_id === agent.worker.agentId &&
        extra(e),
      10_000,
      what,
    );

  it('refuses an unsigned claim or progress in another agent’s name, naming the real sender', async () => {
    const answer = mesh.coordinator.dispatcher.submit({
      tag: 'secret',
      task: 'the question',
      timeoutMs: 20_000,
    });
    const claim = await mesh.waitForEvent(
      (e) => e.subject === 'amf.task.claim' && payloadOf(e).agent_id === victim.worker.agentId,
      10_000,
      'the victim claims the task',
    );
    const taskId = claim.event.amftaskid!;
    const traceId = claim.event.amftraceid!;
    const forgedClaim = createEvent({
      type: 'amf.task.claim',
      sender: senderOf(victim),
      payload: {
        task_id: taskId,
        agent_id: victim.worker.agentId,
        required_capability: 'secret',
        attempt: 1,
      },
      taskId,
      traceId,
    });
    const forgedProgress = createEvent({
      type: 'amf.task.progress',
      sender: senderOf(victim),
      payload: { task_id: taskId, agent_id: victim.worker.agentId, message: 'FORGED progress' },
      taskId,
      traceId,
    });
    const rogueKey = rogue.worker.key.publicKey;
    for (const forged of [forgedClaim, forgedProgress]) {
      // On the shared subject NATS refuses it; on its own subject the intake does.
      rogue.nc.publish(forged.type, JSON.stringify(forged));
      rogue.nc.publish(taskEventSubject(rogueKey, 'mesh'), JSON.stringify(forged));
      await warnedAbout(rogue, 'permission_violation', `${forged.type} refused by NATS`, (e) =>
        String(payloadOf(e).message).includes(forged.type),
      );
      const warning = await warnedAbout(rogue, 'forged_event', `unsigned ${forged.type} refused`, (e) =>
        String(payloadOf(e).message).startsWith(forged.type),
      );
      const details = payloadOf(warning).details as Record<string, unknown>;
      expect(details.claimed_agent).toBe(victim.worker.agentId);
      expect(details.nats_user).toBe(rogueKey);
    }
    // Neither reached a shared subject (only the rogue's own, which the observer reads too), and no
    // warning named the victim.
    for (const forged of [forgedClaim, forgedProgress])
      expect(mesh.events.filter((e) => e.event.id === forged.id).map((e) => e.subject)).toEqual([
        taskEventSubject(rogueKey, 'mesh'),
      ]);
    expect(
      mesh.events.filter(
        (e) =>
          e.subject === 'amf.policy.warning' &&
          payloadOf(e).agent_id === victim.worker.agentId &&
          FORGERY_REASONS.has(String(payloadOf(e).reason)),
      ),
    ).toEqual([]);
    expect(mesh.coordinator.lifecycle.get(taskId)?.claimedBy).toBe(victim.worker.agentId);
    gate.release();
    expect((await answer).text).toBe('honest: the question');
  });

  it('keeps every result and warning of the history through a flood of task events, and warns the flood', async () => {
    const { jsm } = mesh.coordinator.stores;
    const answer = await mesh.coordinator.dispatcher.submit({
      tag: 'flood',
      task: 'keep me',
      timeoutMs: 10_000,
    });
    await mesh.waitForEvent(
      (e) => e.subject === 'amf.result.final' && e.event.amftaskid === answer.taskId,
      10_000,
      'the final',
    );
    rogue.nc.publish('amf.task.cancel', '{}');
    const cancelRefused = await warnedAbout(rogue, 'permission_violation', 'a refused cancel', (e) =>
      String(payloadOf(e).message).includes('amf.task.cancel'),
    );
    let before = new Map<number, string>();
    await mesh.waitFor(
      async () => {
        before = await storedIds(jsm, EVENTS_STREAM);
        const ids = [...before.values()];
        return (
          ids.some((s) => s.endsWith(cancelRefused.event.id)) &&
          ids.some((s) => s.startsWith('amf.result.final'))
        );
      },
      10_000,
      'the final and the warning in AMF_EVENTS',
    );
    const recordedBefore = mesh.coordinator.taskEvents.counts.recorded;
    const quotaRefusedBefore = mesh.coordinator.taskEvents.counts.refused.quota_exceeded ?? 0;

    // The flood, in the rogue's own name and signed (so only the quota stops it): claims, progress
    // and partials of a task of its own, on the shared subjects (NATS refuses each) and on its own.
    const bus = new EventBus(rogue.nc);
    const blob = 'x'.repeat(BLOB_BYTES);
    const taskId = crypto.randomUUID();
    const me = rogue.worker.agentId;
    for (let i = 0; i < FLOOD; i++) {
      const event = signEvent(
        i % 3 === 0
          ? createEvent({
              type: 'amf.task.claim',
              sender: senderOf(rogue),
              payload: {
                task_id: taskId,
                agent_id: me,
                required_capability: 'flood',
                attempt: 1,
              },
              taskId,
            })
          : i % 3 === 1
            ? createEvent({
                type: 'amf.task.progress',
                sender: senderOf(rogue),
                payload: { task_id: taskId, agent_id: me, message: blob },
                taskId,
              })
            : createEvent({
                type: 'amf.result.partial',
                sender: senderOf(rogue),
                payload: { task_id: taskId, agent_id: me, seq: i, delta: blob },
                taskId,
              }),
        rogue.worker.key,
      );
      bus.publish(event, event.type);
      bus.publish(event, taskEventSubject(rogue.worker.key.publicKey, 'direct'));
    }
    await rogue.nc.flush();
    await warnedAbout(rogue, 'quota_exceeded', 'the flood beyond the quota', (e) =>
      String(payloadOf(e).message).includes('task_events.agent_events_per_minute'),
    );
    await warnedAbout(rogue, 'permission_violation', 'progress on the shared subject refused', (e) =>
      String(payloadOf(e).message).includes('amf.task.progress'),
    );
    await mesh.waitFor(
      () => {
        const { recorded, refused } = mesh.coordinator.taskEvents.counts;
        return (
          recorded -
            recordedBefore +
            (refused.quota_exceeded ?? 0) -
            quotaRefusedBefore +
            (refused.invalid_event ?? 0) >=
          FLOOD
        );
      },
      10_000,
      'every flooded event decided',
    );
    const recorded = mesh.coordinator.taskEvents.counts.recorded - recordedBefore;
    // Within a minute's worth (plus what refills during the test), far below the flood.
    expect(recorded).toBeGreaterThan(0);
    expect(recorded).toBeLessThanOrEqual(EVENTS_PER_MINUTE + 1);

    // Nothing of the history was pushed out.
    const after = await storedIds(jsm, EVENTS_STREAM);
    for (const [seq, id] of before) expect(after.get(seq), id).toBe(id);
  });

  it('drops stored finals beyond an agent’s quota, warns it, and does not keep them', async () => {
    const { jsm } = mesh.coordinator.stores;
    const bus = new EventBus(hoarder.nc);
    const blob = 'y'.repeat(BLOB_BYTES);
    const me = hoarder.worker.agentId;
    for (let i = 0; i < FLOOD; i++) {
      const taskId = crypto.randomUUID();
      const final = signEvent(
        createEvent({
          type: 'amf.result.final',
          sender: senderOf(hoarder),
          payload: { task_id: taskId, agent_id: me, status: 'completed', result: { text: blob } },
          taskId,
        }),
        hoarder.worker.key,
      );
      // Retried while the stream is full: the coordinator drains it meanwhile.
      const stored = await bus.publishDurable(
        final,
        agentResultSubject(hoarder.worker.key.publicKey, taskId),
        {
          msgId: `hoard-${taskId}`,
          giveUpMs: 30_000,
        },
      );
      expect(stored).toBe('stored');
    }
    const warning = await warnedAbout(hoarder, 'quota_exceeded', 'stored finals beyond the quota');
    expect((payloadOf(warning).details as { nats_user?: string }).nats_user).toBe(
      hoarder.worker.key.publicKey,
    );
    // Decided (dropped beyond the quota, or refused as no task's) and deleted: the stream empties.
    await mesh.waitFor(
      async () => (await jsm.streams.info(RESULTS_STREAM)).state.messages === 0,
      30_000,
      'AMF_RESULTS emptied of the hoard',
    );
  }, 120_000);
});
