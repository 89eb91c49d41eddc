/**
 * A result for a task whose coordinator stopped: the adopting coordinator ends the still-open task
 * once (KV revision) and publishes one canonical final. It takes the holder's result; another
 * worker's only once the holder is lost (a redelivered work item), and never one from an agent
 * not admitted for the task's tag.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';
import { ensureFabricStores, kvKey } from '../../src/fabric/jetstream.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { createEvent, type AnyAmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { adoptOrphanResult } from '../../src/coordinator/tasks/orphanResults.js';
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import { openTaskSnapshot, registryWith } from '../helpers/lifecycleFixture.js';

const WORKER = 'spiffe://local/worker/w1';
const OTHER = 'spiffe://local/worker/w2';
const STRANGER = 'spiffe://local/worker/other-tag';

/** The real in-memory registry: both echo workers live, a third agent admitted for another tag. */
const agents = registryWith({ [WORKER]: ['echo'], [OTHER]: ['echo'], [STRANGER]: ['summarize'] });
const coordinator: EventSender = {
  identity: 'spiffe://local/coordinator/adopter',
  source: 'http://127.0.0.1:1',
  role: 'coordinator',
  trustDomain: 'local',
};

let nats: TestNats;
let tasks: KV;
let bus: EventBus;
const finals: AnyAmfEvent[] = [];

function result(taskId: string, agentId: string) {
  return createEvent({
    type: 'amf.result.final',
    sender: { ...coordinator, identity: agentId, role: 'specialist' },
    payload: { task_id: taskId, agent_id: agentId, status: 'completed', result: { text: 'done' } },
    taskId,
  });
}

async function openTask(claimedBy?: string): Promise<string> {
  const taskId = randomUUID();
  await tasks.put(kvKey(taskId), JSON.stringify(openTaskSnapshot(taskId, claimedBy)));
  return taskId;
}

beforeAll(async () => {
  nats = await startTestNats();
  const nc = await nats.connect('coordinator');
  tasks = (await ensureFabricStores(nc)).tasks;
  bus = new EventBus(nc);
  bus.subscribe('amf.result.final', (e) => finals.push(e));
  await bus.flush();
});

afterAll(async () => {
  await nats?.close();
});

const deps = () => ({ tasks, bus, sender: coordinator, log: () => undefined, agents });

describe('adopting the results of an orphaned task', () => {
  it('ends an open task once even when two coordinators adopt it at the same time', async () => {
    const taskId = await openTask(WORKER);
    const verdicts = await Promise.all([
      adoptOrphanResult(result(taskId, WORKER), deps()),
      adoptOrphanResult(result(taskId, WORKER), deps()),
    ]);
    expect(verdicts.filter((v) => v === 'adopted')).toHaveLength(1);
    const state = (await tasks.get(kvKey(taskId)))!.json<TaskSnapshot>();
    expect(state).toMatchObject({ state: 'completed', claimed_by: WORKER });
    await bus.flush();
    await new Promise((r) => setTimeout(r, 100));
    const mine = finals.filter((e) => e.amftaskid === taskId);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.amfagentrole).toBe('coordinator');
  });

  it('does not take a result from a worker that does not hold the task, nor one for an ended task', async () => {
    const held = await openTask(WORKER);
    expect(await adoptOrphanResult(result(held, OTHER), deps())).toBe('unknown');
    expect((await tasks.get(kvKey(held)))!.json<TaskSnapshot>().state).toBe('claimed');
    const open = await openTask();
    expect(await adoptOrphanResult(result(open, WORKER), deps())).toBe('adopted');
    expect(await adoptOrphanResult(result(open, OTHER), deps())).toBe('ended');
  });

  it('records an adopted ending again only within the stream’s duplicate window', async () => {
    const seen = async (taskId: string) => {
      await bus.flush();
      await new Promise((r) => setTimeout(r, 100));
      return finals.filter((e) => e.amftaskid === taskId).length;
    };
    // Adopted a moment ago (the adopter may have died before its record): recorded again, under the
    // task's terminal message id, so the stream keeps one.
    const recent = await openTask(WORKER);
    expect(await adoptOrphanResult(result(recent, WORKER), deps())).toBe('adopted');
    expect(await adoptOrphanResult(result(recent, WORKER), deps())).toBe('ended');
    expect(await seen(recent)).toBe(2);
    // Adopted ten minutes ago: past the window, the same worker storing a result again (perhaps a
    // different one) gets no second ending on the fabric.
    const old = await openTask(WORKER);
    const tenMinutesAgo = () => Date.now() - 10 * 60_000;
    expect(await adoptOrphanResult(result(old, WORKER), { ...deps(), now: tenMinutesAgo })).toBe('adopted');
    expect(await adoptOrphanResult(result(old, WORKER), deps())).toBe('ended');
    expect(await seen(old)).toBe(1);
  });

  it('records the ending its own coordinator wrote to KV but died before recording, from the holder’s stored result', async () => {
    const seen = async (taskId: string) => {
      await bus.flush();
      await new Promise((r) => setTimeout(r, 100));
      return finals.filter((e) => e.amftaskid === taskId).length;
    };
    // The task's own coordinator ended it (KV) a moment ago and was killed before its record was
    // stored; the worker, never told `accepted`, stored its result: recorded now, once.
    const endedByOwner = async (state: 'completed' | 'failed', endedAt: Date) => {
      const taskId = randomUUID();
      const snap: TaskSnapshot = {
        ...openTaskSnapshot(taskId, WORKER),
        state,
        ended_at: endedAt.toISOString(),
        outcome: { reason: state, message: 'ended by its own coordinator' },
      };
      await tasks.put(kvKey(taskId), JSON.stringify(snap));
      return taskId;
    };
    const unrecorded = await endedByOwner('completed', new Date());
    expect(await adoptOrphanResult(result(unrecorded, OTHER), deps())).toBe('ended');
    expect(await seen(unrecorded)).toBe(0);
    expect(await adoptOrphanResult(result(unrecorded, WORKER), deps())).toBe('ended');
    expect(await seen(unrecorded)).toBe(1);
    // Another outcome than the one the task ended with, or an ending past the duplicate window: no
    // second, different ending.
    const failed = await endedByOwner('failed', new Date());
    expect(await adoptOrphanResult(result(failed, WORKER), deps())).toBe('ended');
    expect(await seen(failed)).toBe(0);
    const old = await endedByOwner('completed', new Date(Date.now() - 10 * 60_000));
    expect(await adoptOrphanResult(result(old, WORKER), deps())).toBe('ended');
    expect(await seen(old)).toBe(0);
  });

  it('takes the result of a redelivery once the holder is lost, never from an agent of another tag', async () => {
    const taskId = await openTask(WORKER);
    // The holder is live: its own result will come; this one is offered again later.
    expect(await adoptOrphanResult(result(taskId, OTHER), deps())).toBe('unknown');
    expect(await adoptOrphanResult(result(taskId, STRANGER), deps())).toBe('ended');
    agents.markOffline(WORKER, 'test: its process was killed with its coordinator');
    try {
      expect(await adoptOrphanResult(result(taskId, STRANGER), deps())).toBe('ended');
      expect(await adoptOrphanResult(result(taskId, OTHER), deps())).toBe('adopted');
      expect((await tasks.get(kvKey(taskId)))!.json<TaskSnapshot>()).toMatchObject({
        state: 'completed',
        claimed_by: OTHER,
      });
      // The lost holder's own result, arriving late, is refused: the task has ended.
      expect(await adoptOrphanResult(result(taskId, WORKER), deps())).toBe('ended');
    } finally {
      agents.restore({ ...agents.get(WORKER)!, status: 'live', lastSeen: Date.now() + 1 });
    }
    await bus.flush();
    await new Promise((r) => setTimeout(r, 100));
    expect(finals.filter((e) => e.amftaskid === taskId)).toHaveLength(1);
  });

  it('reports a task nobody recorded as unknown (the intake offers it again later)', async () => {
    expect(await adoptOrphanResult(result(randomUUID(), WORKER), deps())).toBe('unknown');
  });
});
