/**
 * Brings to an end the tasks a stopped coordinator left open, whether or not a result ever comes.
 *
 * A result stored for such a task ends it through adoption (tasks/orphanResults.ts). But when the
 * coordinator died together with the task's worker, and no other worker of the tag runs the
 * redelivered work item, no result ever comes; nothing else follows the task (KV holds its state,
 * not its text, and its requester left with the coordinator). So the coordinator holding the
 * sweeper lease looks, every few seconds, for coordinators that stopped without a goodbye
 * (coordinatorPresence.ts), reads the open tasks each left in KV once, and gives every one a
 * deadline: the work queue's ack wait (a redelivery to another worker) plus twice the task's TTL
 * (time for that worker to run it). A task still open at its deadline is failed with a terminal
 * `amf.policy.deny` (`coordinator_lost`), written to KV with the entry's revision first, so an
 * adoption at the same moment and this ending cannot both happen. While the task's holder is still
 * live (it may be running it), the deadline moves on by one TTL, at most three times.
 *
 * A stopped coordinator's presence entry is forgotten only when all its open tasks have ended and
 * each ending is stored in AMF_EVENTS: a coordinator that takes the lease over later finds the same
 * tasks and gives them fresh deadlines. Ending a task is two writes (KV, then the record); a sweeper
 * that dies between them leaves a `coordinator_lost` state without its event, which the next holder
 * finds in the same scan and records again while the stream's duplicate window still guards it
 * (`RECORD_AGAIN_WITHIN_MS`: a record that was stored after all is dropped). A failed task's
 * offer is deleted from the work queue (KV names its sequence), so a worker that comes back later
 * does not run a task that is over.
 */
import { performance } from 'node:perf_hooks';
import type { KV, KvEntry } from '@nats-io/kv';
import { isTerminal, type TaskState } from '../events/taskStateMachine.js';
import { RECORD_AGAIN_WITHIN_MS } from '../events/subjects.js';
import { kvKey } from '../fabric/jetstream.js';
import { WORK_ACK_WAIT_MS } from '../fabric/workQueue.js';
import type { LogFn } from '../log.js';
import type { AgentRegistry } from '../registry/agentRegistry.js';
import type { PolicyNotices } from '../registry/policyNotices.js';
import type { CoordinatorPresence } from './coordinatorPresence.js';
import type { TaskSnapshot } from './sharedState.js';
import { jsonBytes } from '../util/jsonBytes.js';
import { AmfError } from '../errors.js';

const MAX_EXTENSIONS = 3;
/** Bounds the read of the task bucket (its entries arrive as fast as the server sends them). */
const SCAN_TIMEOUT_MS = 60_000;
/** Bounds every other step of a round (one or a few KV round trips). */
const STEP_TIMEOUT_MS = 10_000;

export interface OrphanSweepOptions {
  tasks: KV;
  presence: Pick<CoordinatorPresence, 'stopped' | 'forget'>;
  notices: Pick<PolicyNotices, 'deny'>;
  agents: Pick<AgentRegistry, 'get'>;
  /** True while this coordinator holds the sweeper lease. */
  isHolder: () => boolean;
  log: LogFn;
  /** The task TTL for states written without one. */
  defaultTtlSeconds: number;
  /** Wall clock (epoch ms), against the `ended_at` other coordinators wrote. */
  wallClock?: () => number;
  intervalMs?: number;
  /**
   * Deletes a task's offer from the work queue (its stream sequence, as KV names it), so that a
   * task failed here is not pulled and run later by a worker that comes back.
   */
  withdrawWork?: (seq: number) => Promise<void>;
  /** Time for a redelivery to reach another worker; default the work queue's ack wait. */
  redeliveryMs?: number;
  now?: () => number;
}

interface Orphan {
  instance: string;
  deadline: number;
  ttlMs: number;
  extensions: number;
}

export class OrphanSweep {
  private readonly orphans = new Map<string, Orphan>();
  /** Stopped coordinators whose open tasks were read, with how many of them are still open. */
  private readonly adopted = new Map<string, number>();
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  /** Ends the task scan under way (when a round gave up waiting for it). */
  private stopScan: (() => void) | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly opts: OrphanSweepOptions) {
    this.now = opts.now ?? (() => performance.now());
  }

  start(): this {
    this.timer = setInterval(() => {
      this.ticking = this.ticking.then(() => this.tick());
    }, this.opts.intervalMs ?? 5_000);
    this.timer.unref();
    return this;
  }

  /** Tasks waiting for their deadline (for /metrics and tests). */
  get pending(): number {
    return this.orphans.size;
  }

  /** One round: find newly stopped coordinators' open tasks, end those past their deadline. */
  async tick(): Promise<void> {
    if (this.closed) return;
    if (!this.opts.isHolder()) {
      // Another coordinator sweeps now; it reads the same tasks when it finds their coordinator.
      this.orphans.clear();
      this.adopted.clear();
      return;
    }
    // Every step is bounded: a round that hangs on NATS must not hold up every later round.
    try {
      for (const instance of await bounded(this.opts.presence.stopped(), STEP_TIMEOUT_MS, 'presence read')) {
        if (!this.adopted.has(instance))
          await bounded(this.adoptOpenTasks(instance), SCAN_TIMEOUT_MS, 'task scan');
        if (this.adopted.get(instance) === 0) {
          await bounded(this.opts.presence.forget(instance), STEP_TIMEOUT_MS, 'presence delete');
          this.adopted.delete(instance);
        }
      }
      for (const [taskId, orphan] of this.orphans)
        if (this.now() >= orphan.deadline)
          await bounded(this.settle(taskId, orphan), STEP_TIMEOUT_MS, 'task ending');
    } catch (err) {
      this.stopScan?.();
      this.opts.log('warn', 'orphaned task sweep failed; trying again', { err: String(err) });
    }
  }

  /** Reads the open tasks `instance` left in KV and gives each a deadline. */
  private async adoptOpenTasks(instance: string): Promise<void> {
    const open: TaskSnapshot[] = [];
    const lost: TaskSnapshot[] = [];
    const wallNow = (this.opts.wallClock ?? Date.now)();
    // Bounded by the round (SCAN_TIMEOUT_MS), which ends the watch through stopScan.
    const watch = await this.opts.tasks.watch();
    this.stopScan = () => watch.stop();
    try {
      const status = await this.opts.tasks.status();
      if (status.values > 0)
        for await (const entry of watch) {
          if (entry.operation === 'PUT') {
            const snap = parseSnapshot(entry);
            if (snap && snap.coordinator === instance && !isTerminal(snap.state as TaskState))
              open.push(snap);
            else if (snap?.coordinator === instance && mayBeUnrecordedLoss(snap, wallNow)) lost.push(snap);
          }
          // The last stored value is the first marked as an update (or the last pending): done.
          if (entry.isUpdate || entry.delta === 0) break;
        }
    } finally {
      watch.stop();
      this.stopScan = undefined;
    }
    const start = this.now();
    for (const snap of open) {
      const ttlMs = (snap.ttl_seconds ?? this.opts.defaultTtlSeconds) * 1000;
      // The work queue's ack wait: when another worker gets a dead holder's item.
      const redelivery = this.opts.redeliveryMs ?? WORK_ACK_WAIT_MS;
      this.orphans.set(snap.task_id, {
        instance,
        deadline: start + redelivery + 2 * ttlMs,
        ttlMs,
        extensions: 0,
      });
    }
    this.adopted.set(instance, open.length + lost.length);
    this.opts.log('info', 'coordinator stopped without a goodbye; its open tasks are followed here', {
      instance,
      open_tasks: open.length,
      ...(lost.length > 0 ? { endings_recorded_again: lost.length } : {}),
    });
    for (const snap of lost) this.recordLoss(snap, instance);
  }

  /** At its deadline: already ended (adopted, answered), extended for a live holder, or failed. */
  private async settle(taskId: string, orphan: Orphan): Promise<void> {
    const key = kvKey(taskId);
    const entry = await this.opts.tasks.get(key);
    const snap = entry?.operation === 'PUT' ? parseSnapshot(entry) : undefined;
    if (!entry || !snap || isTerminal(snap.state as TaskState)) return this.done(taskId, orphan);
    // Taken over by a live coordinator (a task waiting for input, TaskLifecycle.adoptWaiting): no orphan.
    if (snap.coordinator !== orphan.instance) return this.done(taskId, orphan);
    const holder = snap.claimed_by;
    if (holder && this.opts.agents.get(holder)?.status === 'live' && orphan.extensions < MAX_EXTENSIONS) {
      orphan.extensions += 1;
      orphan.deadline = this.now() + orphan.ttlMs;
      return;
    }
    const message = `its coordinator stopped and no worker finished it in time${holder ? ` (held by ${holder})` : ''}`;
    const ended: TaskSnapshot = {
      ...snap,
      state: 'failed',
      ended_at: new Date().toISOString(),
      outcome: { reason: 'coordinator_lost', message },
    };
    try {
      await this.opts.tasks.update(key, jsonBytes(ended), entry.revision);
    } catch {
      return; // changed meanwhile (a result was adopted, a claim written): looked at again next round
    }
    this.orphans.delete(taskId);
    if (snap.work_seq !== undefined && this.opts.withdrawWork)
      await this.opts.withdrawWork(snap.work_seq).catch(() => undefined); // gone already: taken, or acked
    this.recordLoss(ended, orphan.instance);
    this.opts.log('warn', 'orphaned task failed at its deadline', {
      task_id: taskId,
      instance: orphan.instance,
    });
  }

  /**
   * Publishes the terminal deny of a task whose KV state says `coordinator_lost`; the task counts as
   * open for its coordinator's presence until the stream holds the deny.
   */
  private recordLoss(snap: TaskSnapshot, instance: string): void {
    const holder = snap.claimed_by;
    let recorded: Promise<unknown> = Promise.resolve('not_sent');
    this.opts.notices.deny(
      {
        reason: 'coordinator_lost',
        message: `task ${snap.task_id} failed: ${snap.outcome?.message ?? 'its coordinator stopped'}`,
        task_id: snap.task_id,
        terminal: true,
        state: 'failed',
        ...(holder ? { agent_id: holder } : {}),
      },
      { traceId: snap.trace_id, onRecord: (r) => (recorded = r) },
    );
    void recorded.then(
      (outcome) => {
        if (outcome === 'stored') this.ended(instance);
        else
          this.opts.log('error', 'the ending of an orphaned task was not recorded', {
            task_id: snap.task_id,
          });
      },
      (err: unknown) =>
        this.opts.log('error', 'the ending of an orphaned task was not recorded', {
          task_id: snap.task_id,
          err: String(err),
        }),
    );
  }

  private done(taskId: string, orphan: Orphan): void {
    this.orphans.delete(taskId);
    this.ended(orphan.instance);
  }

  /** One of `instance`'s open tasks has ended (and its ending is recorded). */
  private ended(instance: string): void {
    const left = this.adopted.get(instance);
    if (left !== undefined) this.adopted.set(instance, Math.max(0, left - 1));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.ticking;
  }
}

/** A sweep's ending written to KV recently enough that its record may be missing and may be redone. */
function mayBeUnrecordedLoss(snap: TaskSnapshot, wallNow: number): boolean {
  if (snap.state !== 'failed' || snap.outcome?.reason !== 'coordinator_lost') return false;
  const age = wallNow - Date.parse(snap.ended_at ?? '');
  return age >= 0 && age < RECORD_AGAIN_WITHIN_MS;
}

/** A stored task state, or undefined when the entry is not one (written by anything but us). */
function parseSnapshot(entry: KvEntry): TaskSnapshot | undefined {
  try {
    const snap = entry.json<Partial<TaskSnapshot>>();
    return typeof snap.task_id === 'string' && typeof snap.state === 'string'
      ? (snap as TaskSnapshot)
      : undefined;
  } catch {
    return undefined;
  }
}

/** `promise`, or a rejection naming `what` once `ms` have passed. */
async function bounded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new AmfError('TIMEOUT', `${what} took longer than ${ms} ms`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
