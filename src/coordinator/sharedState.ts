/**
 * Mirrors the registry and task state into the NATS KV buckets, so a second coordinator on the same
 * NATS sees the same mesh. Task writes are coalesced: within one flush interval only the latest state
 * of each task is written, which keeps the KV cost at about one write per task under load.
 */
import type { KV } from '@nats-io/kv';
import { storeUntilAcknowledged, type ReplyInbox } from '../fabric/replyInbox.js';
import { isTerminal } from '../events/taskStateMachine.js';
import { kvKey, TASKS_BUCKET } from '../fabric/jetstream.js';
import type { AgentRegistry, RegisteredAgent, RegistryChange } from '../registry/agentRegistry.js';
import type { TaskLifecycle, TaskRecord } from './tasks/lifecycle.js';
import { jsonBytes } from '../util/jsonBytes.js';
import { AmfError } from '../errors.js';

export interface TaskSnapshot {
  task_id: string;
  tag: string;
  state: string;
  trace_id: string;
  claimed_by?: string;
  attempt: number;
  parent_task_id?: string;
  created_at: string;
  ended_at?: string;
  outcome?: { reason: string; message: string };
  /** The task's TTL (an orphaned task's deadline is counted from it: orphanSweep.ts). */
  ttl_seconds?: number;
  /** In KV: the instance id of the coordinator that announced it. */
  coordinator?: string;
  /** In KV: the stream sequence of its current work-queue offer (the sweep withdraws it). */
  work_seq?: number;
}

/** The task state as stored in KV (with the coordinator that owns it) and served by the API. */
export function taskSnapshot(task: TaskRecord, coordinator?: string): TaskSnapshot {
  const snap: TaskSnapshot = {
    task_id: task.taskId,
    tag: task.tag,
    state: task.state,
    trace_id: task.traceId,
    attempt: task.attempt,
    created_at: new Date(task.createdAt).toISOString(),
    ttl_seconds: task.ttlSeconds,
  };
  if (coordinator) snap.coordinator = coordinator;
  if (coordinator && task.workSeq !== undefined && !isTerminal(task.state)) snap.work_seq = task.workSeq;
  if (task.claimedBy) snap.claimed_by = task.claimedBy;
  if (task.parentTaskId) snap.parent_task_id = task.parentTaskId;
  if (task.endedAt !== undefined) snap.ended_at = new Date(task.endedAt).toISOString();
  if (task.outcome) snap.outcome = task.outcome;
  return snap;
}

/** How long a task's first or terminal state is retried while the bucket refuses it. */
const DURABLE_STATE_GIVE_UP_MS = 60_000;
/** How long close() waits for endings still on their way to AMF_EVENTS before it writes what it has. */
const CLOSE_RECORD_WAIT_MS = 2_000;

export class SharedState {
  private readonly dirtyTasks = new Map<string, TaskSnapshot>();
  /** Terminal states waiting for their task's record (TaskRecord.recorded) before they are written. */
  private readonly awaitingRecord = new Set<Promise<void>>();
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  /** Set by close(): the connection is about to go, so nothing new is written (or reported failing). */
  private closed = false;

  constructor(
    private readonly agents: KV,
    private readonly tasks: KV,
    private readonly onError: (what: string, err: unknown) => void,
    private readonly flushIntervalMs = 100,
    /** Fire-and-forget publisher for task state (the coordinator's connection); kv.put when absent. */
    private readonly publishTaskState?: (subject: string, bytes: Uint8Array) => void,
    /** This coordinator's instance id, written with each task it owns. */
    private readonly coordinatorId?: string,
    /** Stores a task's first and terminal states with an acknowledgement; default: as the others. */
    private readonly streamWriter?: Pick<ReplyInbox, 'publishToStream'>,
  ) {}

  /**
   * Loads agents other coordinators admitted, then mirrors every registry change that `mirrors`
   * accepts (default: all). Several coordinators each sweep their own registry, so the coordinator
   * uses `mirrors` to let only the sweeper lease's holder write what its sweep decided.
   */
  async attachRegistry(
    registry: AgentRegistry,
    mirrors: (change: RegistryChange) => boolean = () => true,
  ): Promise<void> {
    const keys = await this.agents.keys();
    for await (const key of keys) {
      const entry = await this.agents.get(key);
      if (!entry || entry.length === 0) continue;
      try {
        registry.restore(entry.json<RegisteredAgent>());
      } catch (err) {
        this.onError(`registry entry ${key}`, err);
      }
    }
    registry.onChange((change) => {
      if (this.closed) return;
      // A pending listing is one coordinator's hearsay (each browses mDNS itself): a stranger's
      // flood of advertisements must not fill the shared bucket.
      if (change.kind === 'pending') return;
      // A revival read from the bucket says what the bucket holds already.
      if (change.kind === 'online' && change.fromShared) return;
      if (!mirrors(change)) return;
      const a = change.agent;
      this.agents.put(kvKey(a.record.agent_id), jsonBytes(a)).catch((err: unknown) => {
        if (!this.closed) this.onError('registry write', err);
      });
    });
  }

  /**
   * Writes the agents this registry has marked offline over entries that still say live: run by a
   * coordinator that just became the sweeper, for what its sweep found while another held the lease
   * (or while the old holder was dead and nobody wrote).
   */
  async reconcileOffline(registry: AgentRegistry): Promise<void> {
    for (const agent of registry.list()) {
      if (agent.status !== 'offline') continue;
      const key = kvKey(agent.record.agent_id);
      try {
        const entry = await this.agents.get(key);
        if (!entry || entry.operation !== 'PUT') continue;
        const stored = entry.json<RegisteredAgent>();
        // A newer heartbeat seen by whoever wrote the entry wins over our older silence.
        if (stored.status !== 'live' || stored.lastSeen > agent.lastSeen) continue;
        await this.agents.update(key, jsonBytes(agent), entry.revision);
      } catch (err) {
        this.onError('registry reconcile', err);
      }
    }
  }

  /**
   * Writes a task's first and terminal states durably and coalesces the changes between them into
   * periodic KV writes. The first leaves in the same socket write as the task's announcement and
   * work offer: a worker can only take a task whose state exists, so a coordinator killed right after
   * announcing leaves a task that another coordinator can adopt with its stored result
   * (tasks/orphanResults.ts). Both ends are acknowledged and retried (`streamWriter`): a replicated
   * bucket electing its leader drops a plain write silently, and a task whose first state is
   * missing cannot be adopted, while one whose ending is missing would be failed again by the sweep
   * of a dead coordinator's tasks (orphanSweep.ts). What lies between may be lost: it is only
   * progress.
   */
  attachLifecycle(lifecycle: Pick<TaskLifecycle, 'onChange'>): void {
    lifecycle.onChange((task) => {
      if (!task.owned) return;
      const snap = taskSnapshot(task, this.coordinatorId);
      if (!task.stateRecorded) {
        task.stateRecorded = true;
        this.writeEnd(snap, 'first');
        return;
      }
      if (!isTerminal(task.state)) return this.markDirty(snap);
      // The ending goes to KV only once its terminal event is on record: an adopter that finds a
      // task ended in KV can count on AMF_EVENTS holding its ending (tasks/orphanResults.ts).
      const write = () => {
        this.dirtyTasks.delete(snap.task_id); // an older state must not land after it
        this.writeEnd(snap, 'terminal');
      };
      if (!task.recorded) return write();
      // Not written when the record was not stored (this coordinator stopped first): KV keeps the
      // task open, so the coordinator that adopts its stored result records its ending.
      const written = task.recorded.then((outcome) => {
        if (outcome === 'stored' || outcome === undefined) write();
      }, write);
      this.awaitingRecord.add(written);
      void written.finally(() => this.awaitingRecord.delete(written));
    });
  }

  private writeEnd(snap: TaskSnapshot, which: 'first' | 'terminal'): void {
    if (this.closed) return;
    const written = this.streamWriter ? this.writeDurably(snap, which === 'first') : this.write([snap]);
    written.catch((err: unknown) => this.onError('task write', err));
  }

  /**
   * One state, acknowledged by the stream and retried while refused. `onlyFirst`: only as the key's
   * first value, so a late retry never overwrites a later state (it is refused and stops).
   */
  private async writeDurably(snap: TaskSnapshot, onlyFirst: boolean): Promise<void> {
    if (!this.streamWriter) return;
    const outcome = await storeUntilAcknowledged(
      this.streamWriter,
      `$KV.${TASKS_BUCKET}.${kvKey(snap.task_id)}`,
      jsonBytes(snap),
      {
        giveUpMs: DURABLE_STATE_GIVE_UP_MS,
        stop: () => this.closed,
        ...(onlyFirst
          ? {
              headers: { 'Nats-Expected-Last-Subject-Sequence': '0' },
              isFinal: (err) => /wrong last sequence/i.test(String(err)), // a later state is stored
            }
          : {}),
      },
    );
    if (outcome === 'gave_up' && !this.closed)
      throw new AmfError(
        'UNAVAILABLE',
        `state of task ${snap.task_id} not stored within ${DURABLE_STATE_GIVE_UP_MS} ms`,
      );
  }

  private markDirty(snap: TaskSnapshot): void {
    if (this.closed) return;
    this.dirtyTasks.set(snap.task_id, snap);
    if (!this.flushTimer) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        this.flushing = this.flush();
      }, this.flushIntervalMs);
      this.flushTimer.unref();
    }
  }

  /** Reads a task's last written state (for tasks another coordinator owns). */
  async readTask(taskId: string): Promise<TaskSnapshot | undefined> {
    const entry = await this.tasks.get(kvKey(taskId));
    if (!entry || entry.length === 0) return undefined;
    return entry.json<TaskSnapshot>();
  }

  private async flush(): Promise<void> {
    const batch = [...this.dirtyTasks.values()];
    this.dirtyTasks.clear();
    await this.write(batch);
  }

  private async write(batch: TaskSnapshot[]): Promise<void> {
    if (this.publishTaskState) {
      // A plain publish on the bucket's subject: JetStream stores it like kv.put, without an ack
      // round trip per task (the ack costs more than the write on the hot path).
      for (const snap of batch)
        this.publishTaskState(`$KV.${TASKS_BUCKET}.${kvKey(snap.task_id)}`, jsonBytes(snap));
      return;
    }
    await Promise.all(
      batch.map((snap) =>
        this.tasks
          .put(kvKey(snap.task_id), jsonBytes(snap))
          .catch((err: unknown) => this.onError('task write', err)),
      ),
    );
  }

  /** Writes what is pending (endings whose record comes within a moment included) and stops. */
  async close(): Promise<void> {
    await Promise.race([
      Promise.allSettled([...this.awaitingRecord]),
      new Promise((resolve) => setTimeout(resolve, CLOSE_RECORD_WAIT_MS).unref()),
    ]);
    this.closed = true;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    await this.flushing;
    await this.flush();
  }
}
