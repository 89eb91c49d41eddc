// History cannot be erased by an artifact flood (issue 29, M4), and artifacts and evidence speak only
// for their real sender (issue 29, Low). An admitted agent floods artifacts from its own NATS
// connection: on the seed's subject NATS refuses every one (its user may not publish there), and on
// its own submission subject the coordinator publishes only what fits its quota, into AMF_ARTIFACTS.
// The results and warnings recorded in AMF_EVENTS before the flood are all still there afterwards
// (the history is made small enough that the flood would have pushed them out), and the flood is
// warned naming the flooder. Forged provenance (another agent's name, a foreign signature, a
// coordinator's role) is refused and warned naming the connection that sent it, never the victim.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JetStreamManager } from '@nats-io/jetstream';
import { createEvent, type AmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { submissionSubject } from '../../src/fabric/agentUsers.js';
import { ARTIFACTS_STREAM, EVENTS_STREAM } from '../../src/fabric/jetstream.js';
import { signEvent } from '../../src/identity/eventSignature.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';

const MiB = 1024 * 1024;
const EVENTS_PER_MINUTE = 12;
const BYTES_PER_MINUTE = MiB;
const FLOOD = 40;
const BLOB_BYTES = 200_000;

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

describe('an agent that floods artifacts and forges their provenance', () => {
  let mesh: TestMesh;
  let honest: RunningWorker;
  let rogue: RunningWorker;

  beforeAll(async () => {
    mesh = await startTestMesh({
      config: {
        // Small enough that 40 artifacts of 200 kB would have pushed every earlier event out.
        history: { maxBytes: 2 * MiB },
        artifacts: { agentEventsPerMinute: EVENTS_PER_MINUTE, agentBytesPerMinute: BYTES_PER_MINUTE },
      },
    });
    honest = await mesh.startWorker('honest', ['echo'], echoHandler);
    rogue = await mesh.startWorker('flooder', ['flood'], echoHandler);
  }, 60_000);
  afterAll(async () => {
    await mesh?.close();
  });

  const sender = (w: RunningWorker): EventSender => ({
    identity: w.worker.agentId,
    source: w.url,
    role: 'specialist',
    trustDomain: 'local',
  });
  const artifact = (from: EventSender, payload: Record<string, unknown>) =>
    createEvent({ type: 'amf.artifact.publish', sender: from, payload });
  const warned = (reason: string, what: string, extra: (e: ObservedEvent) => boolean = () => true) =>
    mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        payloadOf(e).reason === reason &&
        payloadOf(e).agent_id === rogue.worker.agentId &&
        extra(e),
      10_000,
      what,
    );
  const onSeedSubject = (id: string) =>
    mesh.events.filter((e) => e.subject === 'amf.artifact.publish' && e.event.id === id);

  it('publishes an agent’s own artifact, and refuses artifacts that speak for someone else', async () => {
    // An honest artifact through the agent's own submission subject reaches the seed's subject.
    const own = artifact(sender(honest), { name: 'report', uri: 'https://example.invalid/r' });
    honest.nc.publish(submissionSubject('artifact', honest.worker.key.publicKey), JSON.stringify(own));
    await mesh.waitFor(() => onSeedSubject(own.id).length === 1, 10_000, 'the honest artifact');

    // The rogue in the honest agent's name, unsigned: its connection names it.
    const unsigned = artifact(sender(honest), { name: 'forged' });
    rogue.nc.publish(submissionSubject('artifact', rogue.worker.key.publicKey), JSON.stringify(unsigned));
    const forgedWarning = await warned('forged_event', 'unsigned forged artifact refused', (e) =>
      String(payloadOf(e).message).includes('in the name of'),
    );
    expect((payloadOf(forgedWarning).details as Record<string, unknown>).claimed_agent).toBe(
      honest.worker.agentId,
    );
    // In its own name, but signed with the honest agent's key.
    const foreignKey = signEvent(artifact(sender(rogue), { name: 'borrowed key' }), honest.worker.key);
    rogue.nc.publish(submissionSubject('artifact', rogue.worker.key.publicKey), JSON.stringify(foreignKey));
    await warned('forged_event', 'artifact signed with another key refused', (e) =>
      String(payloadOf(e).message).includes('not its own'),
    );
    // In its own name, dressed as a coordinator.
    const asCoordinator = { ...artifact(sender(rogue), { name: 'official' }), amfagentrole: 'coordinator' };
    rogue.nc.publish(
      submissionSubject('artifact', rogue.worker.key.publicKey),
      JSON.stringify(asCoordinator),
    );
    await warned('forged_event', 'artifact as a coordinator refused', (e) =>
      String(payloadOf(e).message).includes('as a coordinator'),
    );
    // None of them reached the seed's subject, and no refusal named the honest agent.
    for (const e of [unsigned, foreignKey, asCoordinator]) expect(onSeedSubject(e.id)).toEqual([]);
    const refusals = mesh.events.filter(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        (payloadOf(e).details as { intake?: string } | undefined)?.intake === 'artifact intake',
    );
    expect(refusals.map((e) => payloadOf(e).agent_id)).toEqual([
      rogue.worker.agentId,
      rogue.worker.agentId,
      rogue.worker.agentId,
    ]);
  });

  it('keeps every result and warning of the history through the flood, and warns the flood', async () => {
    const { jsm } = mesh.coordinator.stores;
    // A result and a warning in the history first.
    const answer = await mesh.coordinator.dispatcher.submit({
      tag: 'echo',
      task: 'keep me',
      timeoutMs: 10_000,
    });
    await mesh.waitForEvent(
      (e) => e.subject === 'amf.result.final' && e.event.amftaskid === answer.taskId,
      10_000,
      'the final',
    );
    rogue.nc.publish('amf.task.cancel', '{}');
    const cancelRefused = await warned('permission_violation', 'a refused cancel', (e) =>
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
    const artifactsBefore = (await jsm.streams.info(ARTIFACTS_STREAM)).state.messages;
    const publishedBefore = mesh.coordinator.artifacts.counts.published;

    // The flood: on the seed's subject (NATS refuses each) and on its own submission subject.
    const blob = 'x'.repeat(BLOB_BYTES);
    for (let i = 0; i < FLOOD; i++) {
      rogue.nc.publish('amf.artifact.publish', JSON.stringify(artifact(sender(rogue), { i, blob })));
      rogue.nc.publish(
        submissionSubject('artifact', rogue.worker.key.publicKey),
        JSON.stringify(artifact(sender(rogue), { i, blob })),
      );
    }
    await rogue.nc.flush();
    await warned('quota_exceeded', 'the flood beyond the quota');
    await warned('permission_violation', 'artifacts on the seed subject refused', (e) =>
      String(payloadOf(e).message).includes('amf.artifact.publish'),
    );
    await mesh.waitFor(
      () => {
        const { published, refused } = mesh.coordinator.artifacts.counts;
        return published - publishedBefore + (refused.quota_exceeded ?? 0) >= FLOOD;
      },
      10_000,
      'every submission decided',
    );
    const published = mesh.coordinator.artifacts.counts.published - publishedBefore;
    // Within a minute's worth (plus what refills during the test), far below the flood.
    expect(published).toBeGreaterThan(0);
    expect(published).toBeLessThanOrEqual(Math.ceil(BYTES_PER_MINUTE / BLOB_BYTES) + 1);
    await mesh.waitFor(
      async () => (await jsm.streams.info(ARTIFACTS_STREAM)).state.messages === artifactsBefore + published,
      10_000,
      'the published artifacts in AMF_ARTIFACTS',
    );

    // Nothing of the history was pushed out, and nothing of the flood went into it.
    const after = await storedIds(jsm, EVENTS_STREAM);
    for (const [seq, id] of before) expect(after.get(seq), id).toBe(id);
    expect([...after.values()].filter((s) => s.startsWith('amf.artifact'))).toEqual([]);
  });
});
