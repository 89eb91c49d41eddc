/**
 * The tasks of a coordinator that stopped without a goodbye are brought to an end by the sweeper,
 * result or not. Real NATS KV and events; the clock is injected so deadlines pass without waiting.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import type { JetStreamManager } from '@nats-io/jetstream';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';
import { ensureFabricStores, EVENTS_STREAM, kvKey } from '../../src/fabric/jetstream.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import type { AnyAmfEvent, EventSender } from '../../src/events/cloudEvent.js';
import type { PolicyPayload } from '../../src/events/payloads.js';
import { PolicyNotices } from '../../src/registry/policyNotices.js';
import { CoordinatorPresence, joinPasswordDigest } from '../../src/coordinator/coordinatorPresence.js';
import { OrphanSweep } from '../../src/coordinator/orphanSweep.js';
import { adoptOrphanResult } from '../../src/coordinator/tasks/orphanResults.js';
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import { openTaskSnapshot, registryWith } from '../helpers/lifecycleFixture.js';
import { createEvent } from '../../src/events/cloudEvent.js';

const LIVE_WORKER = 'spiffe://local/worker/live';
const DEAD_WORKER = 'spiffe://local/worker/dead';
const sender: EventSender = {
  identity: 'spiffe://local/coordinator/sweeper',
  source: 'http://127.0.0.1:1',
  role: 'coordinator',
  trustDomain: 'local',
};

let nats: TestNats;
let tasks: KV;
let leases: KV;
let jsm: JetStreamManager;
let bus: EventBus;
const denies: AnyAmfEvent[] = [];
let clock = 0;
const now = () => clock;

beforeAll(async () => {
  nats = await startTestNats();
  const nc = await nats.connect('coordinator');
  ({ tasks, leases, jsm } = await ensureFabricStores(nc));
  bus = new EventBus(nc);
  bus.subscribe('amf.policy.deny', (e) => denies.push(e));
  await bus.flush();
});

afterAll(async () => {
  await nats?.close();
});

async function putTask(snap: TaskSnapshot): Promise<string> {
  await tasks.put(kvKey(snap.task_id), JSON.stringify(snap));
  return snap.task_id;
}

async function stateOf(taskId: string): Promise<TaskSnapshot | undefined> {
  const entry = await tasks.get(kvKey(taskId));
  return entry && entry.length > 0 ? entry.json<TaskSnapshot>() : undefined;
}

const payloadOf = (e: AnyAmfEvent) => e.data.payload as PolicyPayload;

/** A sweep over the shared NATS KV, bus and injected clock; what differs per test is given. */
function sweepWith(
  opts: Pick<
    ConstructorParameters<typeof OrphanSweep>[0],
    'presence' | 'agents' | 'isHolder' | 'redeliveryMs'
  >,
): OrphanSweep {
  return new OrphanSweep({
    tasks,
    notices: new PolicyNotices(bus, sender),
    log: () => undefined,
    defaultTtlSeconds: 30,
    now,
    ...opts,
  });
}

/** How many terminal denies AMF_EVENTS holds for each task id. */
async function storedDenies(): Promise<Map<string, number>> {
  const { state } = await jsm.streams.info(EVENTS_STREAM);
  const counts = new Map<string, number>();
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const msg = await jsm.streams.getMessage(EVENTS_STREAM, { seq }).catch(() => null);
    if (!msg || msg.subject !== 'amf.policy.deny') continue;
    const taskId = payloadOf(msg.json<AnyAmfEvent>()).task_id;
    if (taskId !== undefined) counts.set(taskId, (counts.get(taskId) ?? 0) + 1);
  }
  return counts;
}

describe('coordinator presence', () => {
  it('names a coordinator whose entry stopped changing for the TTL, never a running one', async () => {
    const judge = new CoordinatorPresence({ kv: leases, instanceId: 'judge', ttlMs: 3_000, now });
    const running = new CoordinatorPresence({ kv: leases, instanceId: 'running', ttlMs: 3_000, now }).start();
    const killed = randomUUID();
    await leases.put(`coordinator.${killed}`, '{}'); // written once, then never again (SIGKILL)
    try {
      clock = 0;
      expect(await judge.stopped()).toEqual([]);
      clock = 2_000;
      expect(await judge.stopped()).toEqual([]);
      // The running one rewrites its entry: its revision changes, so its unchanged time restarts.
      await leases.put('coordinator.running', '{}');
      clock = 3_500;
      expect(await judge.stopped()).toEqual([killed]);
      await judge.forget(killed);
      expect(await leases.get(`coordinator.${killed}`).then((e) => e?.operation)).toBe('DEL');
    } finally {
      await running.close();
    }
    // A clean stop says goodbye: its entry is gone.
    expect(await leases.get('coordinator.running').then((e) => e?.operation)).toBe('DEL');
  });
});

describe('coordinator presence and the join password', () => {
  it('reports another coordinator of the mesh with another join password, once, and not one with the same', async () => {
    const same = new CoordinatorPresence({
      kv: leases,
      instanceId: `same-${randomUUID()}`,
      joinDigest: joinPasswordDigest('shared-secret'),
    }).start();
    const other = new CoordinatorPresence({
      kv: leases,
      instanceId: `other-${randomUUID()}`,
      joinDigest: joinPasswordDigest('another-secret'),
    }).start();
    const reported: string[] = [];
    const judge = new CoordinatorPresence({
      kv: leases,
      instanceId: 'judge-join',
      joinDigest: joinPasswordDigest('shared-secret'),
      onJoinMismatch: (instance) => reported.push(instance),
    });
    try {
      await leases.put(
        `coordinator.${same.instanceId}`,
        JSON.stringify({ join_digest: joinPasswordDigest('shared-secret') }),
      );
      await leases.put(
        `coordinator.${other.instanceId}`,
        JSON.stringify({ join_digest: joinPasswordDigest('another-secret') }),
      );
      await judge.checkJoinPasswords();
      await judge.checkJoinPasswords();
      expect(reported).toEqual([other.instanceId]);
      // The digest names no password.
      expect(joinPasswordDigest('shared-secret')).not.toContain('shared');
    } finally {
      await Promise.all([same.close(), other.close()]);
    }
  });
});

describe('the sweep of a stopped coordinator’s open tasks', () => {
  it('fails each at its deadline, once, unless it ended or its holder is live', async () => {
    const dead = randomUUID();
    const alive = randomUUID();
    const open = (claimedBy?: string, coordinator = dead): TaskSnapshot => ({
      ...openTaskSnapshot(randomUUID(), claimedBy),
      ttl_seconds: 1,
      coordinator,
    });
    const heldByDead = await putTask(open(DEAD_WORKER));
    const unclaimed = await putTask(open());
    const heldByLive = await putTask(open(LIVE_WORKER));
    const adoptedMeanwhile = await putTask(open(DEAD_WORKER));
    const othersTask = await putTask(open(DEAD_WORKER, alive));
    const alreadyEnded = await putTask({ ...open(DEAD_WORKER), state: 'completed' });

    const agents = registryWith({ [LIVE_WORKER]: ['echo'], [DEAD_WORKER]: ['echo'] });
    agents.markOffline(DEAD_WORKER, 'heartbeat_missed');
    // The dead coordinator's presence entry, written once and never renewed (a SIGKILL).
    await leases.put(`coordinator.${dead}`, '{}');
    const presence = new CoordinatorPresence({
      kv: leases,
      instanceId: `sweeper-${randomUUID()}`,
      renewIntervalMs: 100,
      ttlMs: 300,
      now,
    });
    const sweep = sweepWith({ presence, agents, isHolder: () => true, redeliveryMs: 1_000 });
    // The sweeper saw the entry a second ago; unchanged since, longer than the presence TTL.
    clock = -1_000;
    await presence.stopped();
    clock = 0;
    await sweep.tick();
    expect(sweep.pending).toBe(4); // the dead coordinator's four open tasks, not the others
    // Before the deadline (redelivery 1 s + 2 × TTL 1 s) nothing is ended.
    clock = 2_500;
    await sweep.tick();
    expect((await stateOf(heldByDead))?.state).toBe('claimed');

    // A result adopted meanwhile ends that task; the sweep leaves it alone.
    const result = createEvent({
      type: 'amf.result.final',
      sender: { ...sender, identity: DEAD_WORKER, role: 'specialist' },
      payload: {
        task_id: adoptedMeanwhile,
        agent_id: DEAD_WORKER,
        status: 'completed',
        result: { text: 'ok' },
      },
      taskId: adoptedMeanwhile,
    });
    expect(await adoptOrphanResult(result, { tasks, bus, sender, log: () => undefined, agents })).toBe(
      'adopted',
    );

    clock = 3_000;
    await sweep.tick();
    for (const id of [heldByDead, unclaimed]) {
      const state = await stateOf(id);
      expect(state).toMatchObject({ state: 'failed', outcome: { reason: 'coordinator_lost' } });
    }
    expect((await stateOf(adoptedMeanwhile))?.state).toBe('completed');
    expect((await stateOf(othersTask))?.state).toBe('claimed');
    expect((await stateOf(alreadyEnded))?.state).toBe('completed');
    // The live holder may still be running it: its deadline moves on by one TTL, three times at most.
    expect((await stateOf(heldByLive))?.state).toBe('claimed');
    // Extended at 3 s (above), 4 s and 5 s; failed at 6 s.
    for (const t of [4_000, 5_000]) {
      clock = t;
      await sweep.tick();
    }
    expect((await stateOf(heldByLive))?.state).toBe('claimed');
    clock = 6_000;
    await sweep.tick();
    expect((await stateOf(heldByLive))?.state).toBe('failed');
    expect(sweep.pending).toBe(0);

    // One terminal deny per failed task, and none for the others.
    await bus.flush();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const ended = denies
      .filter((e) => payloadOf(e).reason === 'coordinator_lost')
      .map((e) => payloadOf(e).task_id)
      .sort();
    expect(ended).toEqual([heldByDead, unclaimed, heldByLive].sort());
    expect(denies.every((e) => payloadOf(e).terminal === true)).toBe(true);

    // All of its tasks ended: the stopped coordinator is forgotten on the next round.
    await sweep.tick();
    expect((await leases.get(`coordinator.${dead}`))?.operation).toBe('DEL');
    await sweep.close();
  });

  it('does nothing while another coordinator holds the lease', async () => {
    const dead = randomUUID();
    const taskId = await putTask({ ...openTaskSnapshot(randomUUID()), ttl_seconds: 1, coordinator: dead });
    await leases.put(`coordinator.${dead}`, '{}');
    const sweep = sweepWith({
      presence: new CoordinatorPresence({ kv: leases, instanceId: `bystander-${randomUUID()}`, now }),
      agents: registryWith({}),
      isHolder: () => false,
      redeliveryMs: 0,
    });
    clock = 0;
    await sweep.tick();
    clock = 60_000;
    await sweep.tick();
    expect(sweep.pending).toBe(0);
    expect((await stateOf(taskId))?.state).toBe('announced');
    expect((await leases.get(`coordinator.${dead}`))?.operation).toBe('PUT'); // not forgotten either
    await sweep.close();
  });

  it('records again an ending a sweeper left without its event, inside the duplicate window only, never twice', async () => {
    const dead = randomUUID();
    const lostAt = (msAgo: number): TaskSnapshot => ({
      ...openTaskSnapshot(randomUUID(), DEAD_WORKER),
      ttl_seconds: 1,
      coordinator: dead,
      state: 'failed',
      ended_at: new Date(Date.now() - msAgo).toISOString(),
      outcome: {
        reason: 'coordinator_lost',
        message: 'its coordinator stopped and no worker finished it in time',
      },
    });
    // A sweeper wrote these to KV and died: one before its record, one after it.
    const unrecorded = await putTask(lostAt(5_000));
    const recorded = await putTask(lostAt(5_000));
    new PolicyNotices(bus, sender).deny({
      reason: 'coordinator_lost',
      message: 'recorded by the sweeper that died',
      task_id: recorded,
      terminal: true,
      state: 'failed',
    });
    // Beyond the window a record could not be told from a second one: left as it is.
    const longAgo = await putTask(lostAt(10 * 60_000));
    await leases.put(`coordinator.${dead}`, '{}');
    await bus.flush();

    const presence = new CoordinatorPresence({
      kv: leases,
      instanceId: `heir-${randomUUID()}`,
      renewIntervalMs: 100,
      ttlMs: 300,
      now,
    });
    const sweep = sweepWith({
      presence,
      agents: registryWith({ [DEAD_WORKER]: ['echo'] }),
      isHolder: () => true,
      redeliveryMs: 0,
    });
    clock = 100_000;
    await presence.stopped();
    clock = 101_000;
    await sweep.tick();
    let counts = new Map<string, number>();
    for (let i = 0; i < 50 && counts.get(unrecorded) === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      counts = await storedDenies();
    }
    expect(counts.get(unrecorded)).toBe(1);
    expect(counts.get(recorded)).toBe(1);
    expect(counts.get(longAgo)).toBeUndefined();
    // Every ending recorded: the stopped coordinator is forgotten.
    await sweep.tick();
    expect((await leases.get(`coordinator.${dead}`))?.operation).toBe('DEL');
    await sweep.close();
  });
});
