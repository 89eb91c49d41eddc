/**
 * TTL, watchdog and retry rules of the task lifecycle on a fake clock and an in-memory fabric: no
 * nats-server, no sleeps. The fabric records what the lifecycle publishes and delivers what a
 * worker would send; the notices record warnings and denials.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';
import {
  TaskLifecycle,
  type LifecycleClock,
  type TaskFabric,
  type TaskNotices,
  type TerminalInfo,
  type TimerHandle,
} from '../../src/coordinator/tasks/lifecycle.js';
import {
  createEvent,
  type AmfEvent,
  type AnyAmfEvent,
  type EventSender,
} from '../../src/events/cloudEvent.js';
import type { AnnouncePayload, PolicyPayload } from '../../src/events/payloads.js';
import { subjectMatches } from '../../src/events/subjects.js';
import type { EventHandler } from '../../src/fabric/eventBus.js';

/** Timers fire only when the test moves time forward, in due order. */
class FakeClock implements LifecycleClock {
  private time = 1_700_000_000_000;
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + ms, fn });
    return id;
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (typeof handle === 'number') this.timers.delete(handle);
  }

  get pending(): number {
    return this.timers.size;
  }

  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      let due: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers)
        if (entry[1].at <= end && (!due || entry[1].at < due[1].at)) due = entry;
      if (!due) break;
      this.timers.delete(due[0]);
      this.time = due[1].at;
      due[1].fn();
    }
    this.time = end;
  }
}

class MemoryFabric implements TaskFabric {
  readonly published: { event: AmfEvent; subjects: string[] }[] = [];
  private readonly subs = new Set<{ subject: string; handler: EventHandler }>();

  publish(event: AmfEvent, ...subjects: string[]): void {
    this.published.push({ event, subjects });
  }

  subscribe(subject: string, handler: EventHandler): { unsubscribe(): void } {
    const sub = { subject, handler };
    this.subs.add(sub);
    return { unsubscribe: () => this.subs.delete(sub) };
  }

  /** Hands `event` to every subscription its subject matches, as NATS would. */
  deliver(event: AnyAmfEvent, subject: string = event.type): void {
    for (const s of [...this.subs]) if (subjectMatches(s.subject, subject)) s.handler(event, subject);
  }

  announcements(taskId: string): AnnouncePayload[] {
    return this.published
      .map((p) => p.event)
      .filter((e): e is AmfEvent<AnnouncePayload> => e.type === 'amf.task.announce' && e.amftaskid === taskId)
      .map((e) => e.data.payload);
  }
}

class RecordingNotices implements TaskNotices {
  readonly warnings: PolicyPayload[] = [];
  readonly denials: PolicyPayload[] = [];
  warn(payload: PolicyPayload): void {
    this.warnings.push(payload);
  }
  deny(payload: PolicyPayload): void {
    this.denials.push(payload);
  }
  /** Terminal notices (expiry warnings and denials) about one task. */
  terminal(taskId: string): PolicyPayload[] {
    return [...this.warnings, ...this.denials].filter((p) => p.terminal === true && p.task_id === taskId);
  }
}

const coordinator: EventSender = {
  identity: 'spiffe://local/coordinator/test',
  source: 'urn:test:coordinator',
  role: 'coordinator',
  trustDomain: 'local',
};

function workerSender(agentId: string): EventSender {
  return { identity: agentId, source: 'urn:test:worker', role: 'specialist', trustDomain: 'local' };
}

const WORKER_A = 'spiffe://local/worker/a';
const WORKER_B = 'spiffe://local/worker/b';

describe('task lifecycle timing (fake clock, in-memory fabric)', () => {
  let clock: FakeClock;
  let fabric: MemoryFabric;
  let notices: RecordingNotices;
  let registry: AgentRegistry;
  let lifecycle: TaskLifecycle;
  let ended: TerminalInfo[];

  function admit(agentId: string): void {
    registry.admit({
      agent_id: agentId,
      endpoint: 'http://127.0.0.1:9',
      protocols_supported: ['A2A/1.0'],
      capability_tags: ['echo'],
    });
  }

  function start(options: {
    ttlSeconds: number;
    maxRetries: number;
    retryDelaySeconds?: number;
    workerLossRetries?: number;
  }): void {
    lifecycle = new TaskLifecycle(fabric, registry, coordinator, notices, {
      ttlSeconds: options.ttlSeconds,
      maxRetries: options.maxRetries,
      retryDelaySeconds: options.retryDelaySeconds ?? 0,
      ...(options.workerLossRetries !== undefined ? { workerLossRetries: options.workerLossRetries } : {}),
      watchdogGraceFactor: 2,
      retainedTerminalTasks: 100,
      decideDelegation: () => Promise.resolve({ allow: true, reasons: [], max_depth: 5 }),
      clock,
    });
    lifecycle.start();
    lifecycle.onTerminal((info) => ended.push(info));
  }

  function send(agentId: string, event: Parameters<typeof createEvent>[0]): void {
    fabric.deliver(createEvent({ ...event, sender: workerSender(agentId) }) as AnyAmfEvent);
  }

  function claim(taskId: string, agentId: string): void {
    send(agentId, {
      type: 'amf.task.claim',
      sender: workerSender(agentId),
      payload: { task_id: taskId, agent_id: agentId },
      taskId,
    });
  }

  beforeEach(() => {
    clock = new FakeClock();
    fabric = new MemoryFabric();
    notices = new RecordingNotices();
    registry = new AgentRegistry({
      defaultHeartbeatSeconds: 5,
      offlineAfterMissed: 3,
      now: () => clock.now(),
    });
    ended = [];
    admit(WORKER_A);
  });

  it('expires an unclaimed task exactly at its TTL when no retries are left', () => {
    start({ ttlSeconds: 5, maxRetries: 0 });
    const task = lifecycle.announce({ tag: 'echo', task: 'hi' });
    clock.advance(4_999);
    expect(lifecycle.get(task.taskId)?.state).toBe('announced');
    expect(ended).toHaveLength(0);
    clock.advance(1);
    expect(lifecycle.get(task.taskId)?.state).toBe('expired');
    expect(ended.map((e) => [e.state, e.durationMs])).toEqual([['expired', 5_000]]);
    expect(notices.terminal(task.taskId)).toEqual([
      expect.objectContaining({ reason: 'task_ttl_expired', state: 'expired', retrying: false }),
    ]);
    expect(lifecycle.activeCount).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('republishes after the retry delay with the next attempt number, then expires', () => {
    start({ ttlSeconds: 5, maxRetries: 2, retryDelaySeconds: 1 });
    const task = lifecycle.announce({ tag: 'echo', task: 'hi' });
    clock.advance(5_000);
    // The TTL ran out: a retry is promised, but the republish waits for the retry delay.
    expect(notices.warnings.at(-1)).toMatchObject({ reason: 'task_ttl_expired', retrying: true });
    expect(fabric.announcements(task.taskId)).toHaveLength(1);
    clock.advance(999);
    expect(fabric.announcements(task.taskId)).toHaveLength(1);
    clock.advance(1);
    expect(fabric.announcements(task.taskId).map((p) => [p.attempt, p.max_retries])).toEqual([
      [1, 2],
      [2, 1],
    ]);
    expect(lifecycle.get(task.taskId)?.attempt).toBe(2);
    clock.advance(6_000);
    expect(fabric.announcements(task.taskId).map((p) => p.attempt)).toEqual([1, 2, 3]);
    expect(ended).toHaveLength(0);
    clock.advance(5_000);
    expect(ended.map((e) => e.state)).toEqual(['expired']);
    expect(notices.terminal(task.taskId)).toHaveLength(1);
    clock.advance(60_000);
    expect(fabric.announcements(task.taskId)).toHaveLength(3);
    expect(ended).toHaveLength(1);
  });

  it('gives up on a silent worker after ttl × grace, counting from its last sign of life', () => {
    start({ ttlSeconds: 10, maxRetries: 0 });
    const task = lifecycle.announce({ tag: 'echo', task: 'hi' });
    claim(task.taskId, WORKER_A);
    expect(lifecycle.get(task.taskId)?.state).toBe('claimed');
    clock.advance(15_000);
    send(WORKER_A, {
      type: 'amf.task.progress',
      sender: workerSender(WORKER_A),
      payload: { task_id: task.taskId, agent_id: WORKER_A, message: 'working' },
      taskId: task.taskId,
    });
    // The first watchdog check (at 20 s) finds progress 5 s old: the window restarts from it.
    clock.advance(19_999);
    expect(lifecycle.get(task.taskId)?.state).toBe('claimed');
    expect(ended).toHaveLength(0);
    clock.advance(1);
    expect(ended.map((e) => [e.state, e.task.outcome?.reason])).toEqual([['failed', 'worker_silent']]);
    expect(notices.terminal(task.taskId)).toEqual([
      expect.objectContaining({ reason: 'worker_silent', state: 'failed', agent_id: WORKER_A }),
    ]);
  });

  it('does not count a blocked task as silent', () => {
    start({ ttlSeconds: 10, maxRetries: 0 });
    const task = lifecycle.announce({ tag: 'echo', task: 'hi' });
    claim(task.taskId, WORKER_A);
    send(WORKER_A, {
      type: 'amf.task.blocked',
      sender: workerSender(WORKER_A),
      payload: { task_id: task.taskId, agent_id: WORKER_A, reason: 'needs input' },
      taskId: task.taskId,
    });
    clock.advance(120_000);
    expect(lifecycle.get(task.taskId)?.state).toBe('blocked');
    expect(ended).toHaveLength(0);
  });

  it('re-announces at once when the claimant goes offline, and fails when retries run out', () => {
    admit(WORKER_B);
    start({ ttlSeconds: 10, maxRetries: 1, retryDelaySeconds: 30 });
    const task = lifecycle.announce({ tag: 'echo', task: 'hi' });
    claim(task.taskId, WORKER_A);
    registry.markOffline(WORKER_A, 'missed heartbeats');
    // A lost worker is not a TTL expiry: the next attempt goes out without the retry delay.
    expect(fabric.announcements(task.taskId).map((p) => [p.attempt, p.max_retries])).toEqual([
      [1, 1],
      [2, 0],
    ]);
    expect(notices.warnings.at(-1)).toMatchObject({ reason: 'worker_offline', retrying: true });
    const record = lifecycle.get(task.taskId);
    expect(record?.state).toBe('announced');
    expect(record?.claimedBy).toBeUndefined();
    claim(task.taskId, WORKER_B);
    expect(lifecycle.get(task.taskId)?.claimedBy).toBe(WORKER_B);
    registry.markOffline(WORKER_B, 'missed heartbeats');
    expect(ended.map((e) => [e.state, e.task.outcome?.reason])).toEqual([['failed', 'worker_offline']]);
    expect(notices.terminal(task.taskId)).toEqual([
      expect.objectContaining({ reason: 'worker_offline', agent_id: WORKER_B }),
    ]);
    expect(fabric.announcements(task.taskId)).toHaveLength(2);
  });

  it('re-announces an unclaimed task at its TTL as a lost one when a worker of its tag went offline meanwhile', async () => {
    // The lost worker may have taken the offer and died with its claim still held back
    // (worker/deferredClaims.ts): a loss retry brings the task back instead of an expiry.
    admit(WORKER_B);
    start({ ttlSeconds: 5, maxRetries: 0, workerLossRetries: 1 });
    const task = lifecycle.announce({ tag: 'echo', task: 'hi' });
    registry.markOffline(WORKER_A, 'gone');
    await Promise.resolve();
    clock.advance(5_000);
    expect(fabric.announcements(task.taskId).map((p) => p.attempt)).toEqual([1, 2]);
    expect(notices.warnings.at(-1)).toMatchObject({ reason: 'worker_offline', retrying: true });
    expect(lifecycle.get(task.taskId)?.state).toBe('announced');
    // The new offer is one no lost worker took: its TTL expires it as usual.
    clock.advance(5_000);
    expect(ended.map((e) => [e.state, e.task.outcome?.reason])).toEqual([['expired', 'task_ttl_expired']]);
  });

  it('expires an unclaimed task at its TTL when the worker lost serves other tags only', async () => {
    registry.admit({
      agent_id: WORKER_B,
      endpoint: 'http://127.0.0.1:9',
      protocols_supported: ['A2A/1.0'],
      capability_tags: ['other'],
    });
    start({ ttlSeconds: 5, maxRetries: 0, workerLossRetries: 1 });
    const task = lifecycle.announce({ tag: 'echo', task: 'hi' });
    registry.markOffline(WORKER_B, 'gone');
    await Promise.resolve();
    clock.advance(5_000);
    expect(fabric.announcements(task.taskId)).toHaveLength(1);
    expect(ended.map((e) => [e.state, e.task.outcome?.reason])).toEqual([['expired', 'task_ttl_expired']]);
  });

  it('ends a task once: a result after expiry, a cancel after completion and later timers change nothing', () => {
    start({ ttlSeconds: 5, maxRetries: 0 });
    const expired = lifecycle.announce({ tag: 'echo', task: 'late' });
    clock.advance(5_000);
    claim(expired.taskId, WORKER_A);
    send(WORKER_A, {
      type: 'amf.result.final',
      sender: workerSender(WORKER_A),
      payload: { task_id: expired.taskId, agent_id: WORKER_A, status: 'completed', result: { text: 'x' } },
      taskId: expired.taskId,
    });
    expect(lifecycle.get(expired.taskId)?.state).toBe('expired');

    const done = lifecycle.announce({ tag: 'echo', task: 'on time' });
    claim(done.taskId, WORKER_A);
    send(WORKER_A, {
      type: 'amf.result.final',
      sender: workerSender(WORKER_A),
      payload: { task_id: done.taskId, agent_id: WORKER_A, status: 'completed', result: { text: 'ok' } },
      taskId: done.taskId,
    });
    expect(lifecycle.cancel(done.taskId, 'requester_timeout', 'too late')).toBe(false);
    clock.advance(600_000);
    lifecycle.close();

    expect(ended.map((e) => [e.task.taskId, e.state])).toEqual([
      [expired.taskId, 'expired'],
      [done.taskId, 'completed'],
    ]);
    expect(notices.terminal(expired.taskId)).toHaveLength(1);
    expect(notices.terminal(done.taskId)).toHaveLength(0);
    // The late claim of the expired task is refused to that worker alone; nothing cancels the done one.
    const cancels = fabric.published.filter((p) => p.event.type === 'amf.task.cancel');
    expect(cancels.map((c) => c.event.data.payload)).toEqual([
      expect.objectContaining({ task_id: expired.taskId, reason: 'claim_refused', agent_id: WORKER_A }),
    ]);
  });

  it('fails an in-flight task once when the requester cancels it, and tells the worker', () => {
    start({ ttlSeconds: 5, maxRetries: 3 });
    const task = lifecycle.announce({ tag: 'echo', task: 'hi' });
    claim(task.taskId, WORKER_A);
    expect(lifecycle.cancel(task.taskId, 'requester_cancelled', 'gone')).toBe(true);
    expect(lifecycle.cancel(task.taskId, 'requester_cancelled', 'gone')).toBe(false);
    clock.advance(600_000);
    expect(ended.map((e) => [e.state, e.task.outcome?.reason])).toEqual([['failed', 'requester_cancelled']]);
    expect(notices.terminal(task.taskId)).toHaveLength(1);
    const cancels = fabric.published.filter((p) => p.event.type === 'amf.task.cancel');
    expect(cancels.map((p) => p.event.data.payload)).toEqual([
      { task_id: task.taskId, reason: 'requester_cancelled', message: 'gone', agent_id: WORKER_A },
    ]);
    expect(clock.pending).toBe(0);
  });
});
