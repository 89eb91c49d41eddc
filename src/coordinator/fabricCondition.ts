/**
 * How the fabric is doing, as this coordinator can tell, and what it refuses while the fabric is in
 * trouble. Three troubles are named, each from evidence rather than from its effects:
 *
 * - **unreachable or frozen**: the connection is down (the client's own status events), or the
 *   server does not answer a ping within {@link PROBE_TIMEOUT_MS} (a SIGSTOPped or hung server keeps
 *   its TCP connections open, so nothing else notices for minutes). Agents' heartbeats cannot arrive
 *   meanwhile, so agents look offline: a task whose tag has no live agent is refused with
 *   UNAVAILABLE (503) naming the fabric, not NO_AGENT_FOR_TAG (404). The same holds for a short
 *   while after the fabric is back ({@link REJOIN_GRACE_MS}), until agents have heartbeated again.
 * - **store full**: a stream refused a publish for lack of room (JetStream's own error codes), the
 *   spawned server's log says so, or the data dir's disk has less than {@link LOW_DISK_BYTES} free.
 *   Every new task is refused with INSUFFICIENT_STORAGE (507): its announcement, offer and ending
 *   could not be stored. What is already accepted keeps retrying its writes (nothing is given up),
 *   and the refusals stop by themselves once a store succeeds again or the disk has room.
 * - **JetStream silent**: stream publishes go unanswered while the server answers pings.
 *
 * nats-server 2.9 hangs after a write failed for lack of room (pings unanswered, or JetStream
 * silent), even once space returns; for a spawned server the coordinator then has the supervisor
 * start it again (SIGKILL; the supervisor restarts it on the same port and store) once the disk has
 * room, so the mesh recovers by itself.
 */
import { statfs } from 'node:fs/promises';
import type { NatsConnection } from '@nats-io/transport-node';
import { AmfError } from '../errors.js';
import { ReplyInbox, type StreamAnswer } from '../fabric/replyInbox.js';
import type { LogFn } from '../log.js';
import type { StoreHealth } from './natsServerLog.js';

/** How often the server is pinged. */
export const PROBE_INTERVAL_MS = 1_000;
/** A ping not answered within this means the server is frozen. */
export const PROBE_TIMEOUT_MS = 2_000;
/** After the fabric is back, agents need a heartbeat or two to be live again. */
export const REJOIN_GRACE_MS = 10_000;
/** Less free space than this on the data dir's disk is a full store (nats-server cannot write). */
export const LOW_DISK_BYTES = 2 * 1024 * 1024;
/** A store refusal counts this long; a store that works again clears it at once. */
const REFUSAL_COUNTS_MS = 5_000;
/** Stream publishes unanswered this long (with pings answered) mean JetStream has stopped. */
const JETSTREAM_SILENT_MS = 15_000;
/** At most one restart of a silent server in this long. */
const KICK_INTERVAL_MS = 60_000;

/** What `/health` shows of the fabric's condition (inside `nats`). */
export interface FabricConditionHealth {
  /** False while the server does not answer pings (frozen) or the connection is down. */
  responsive: boolean;
  /** JetStream's store: `full` while writes are refused for lack of room, `silent` while unanswered. */
  jetstream: 'ok' | 'full' | 'silent';
  /** What is wrong, in a sentence, when something is. */
  problem?: string;
  /** Free bytes on the data dir's disk (a spawned server only). */
  disk_free_bytes?: number;
}

export interface FabricConditionOptions {
  nc: NatsConnection;
  log: LogFn;
  /** The spawned server's data dir (its disk is watched); absent with an external NATS. */
  dataDir?: string;
  /** The spawned server's store as its own log reports it (natsServerLog.ts). */
  serverStore?: () => StoreHealth | undefined;
  /** Restarts the spawned server (SIGKILL; its supervisor starts it again); absent with an external NATS. */
  restartServer?: () => void;
  now?: () => number;
}

export class FabricCondition {
  private connected = true;
  private downSince: number | undefined;
  private backAt: number | undefined;
  private unresponsiveSince: number | undefined;
  private probing = false;
  private refusal: { at: number; detail: string } | undefined;
  private unansweredSince: number | undefined;
  private diskFree: number | undefined;
  private lastKick = 0;
  /** The disk was full while the server did not answer (the hang a restart cures). */
  private fullDuringTrouble = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly now: () => number;

  constructor(private readonly options: FabricConditionOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Starts pinging the server and following the answers to stream publishes. */
  start(): this {
    ReplyInbox.of(this.options.nc).onStreamAnswer = (answer) => this.onStreamAnswer(answer);
    this.timer = setInterval(() => void this.tick(), PROBE_INTERVAL_MS);
    this.timer.unref();
    return this;
  }

  /** The connection's status events (coordinatorEvents.ts watchConnection). */
  setConnected(connected: boolean): void {
    if (connected === this.connected) return;
    this.connected = connected;
    if (connected) {
      this.downSince = undefined;
      this.backAt = this.now();
    } else this.downSince = this.now();
  }

  /**
   * Why a new task is refused now, if it is: a full store refuses every task; an unreachable or
   * frozen fabric (or one just back) refuses a task whose tag has no live agent, since agents only
   * look offline while their heartbeats cannot arrive.
   */
  refuseNewTask(tagServed: boolean): AmfError | undefined {
    const full = this.storeFullReason();
    if (full) return new AmfError('INSUFFICIENT_STORAGE', `the mesh cannot take new tasks now: ${full}`);
    if (tagServed) return undefined;
    const down = this.unreachableReason();
    if (down)
      return new AmfError(
        'UNAVAILABLE',
        `the NATS fabric is unavailable (${down}): agents cannot be heard from, so none looks live; try again shortly`,
      );
    return undefined;
  }

  /** The condition as `/health` shows it. */
  health(): FabricConditionHealth {
    const full = this.storeFullReason();
    const down = this.unreachableReason(false);
    const silent = this.silentFor() !== undefined;
    const problem = down ?? full ?? (silent ? this.silentReason() : undefined);
    return {
      responsive: this.connected && this.unresponsiveSince === undefined,
      jetstream: full ? 'full' : silent ? 'silent' : 'ok',
      ...(problem ? { problem } : {}),
      ...(this.diskFree !== undefined ? { disk_free_bytes: this.diskFree } : {}),
    };
  }

  /** True while the fabric is not fit for new work (for `/health`'s status). */
  get degraded(): boolean {
    const h = this.health();
    return !h.responsive || h.jetstream !== 'ok';
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    const inbox = ReplyInbox.of(this.options.nc);
    inbox.onStreamAnswer = undefined;
  }

  private onStreamAnswer(answer: StreamAnswer): void {
    switch (answer.kind) {
      case 'stored':
        if (this.refusal) this.options.log('info', 'the JetStream store takes writes again');
        this.refusal = undefined;
        this.unansweredSince = undefined;
        return;
      case 'refused':
        this.unansweredSince = undefined;
        if (answer.refusal.storeFull) {
          if (!this.refusal)
            this.options.log(
              'error',
              'the JetStream store is full: new tasks are refused until it has room',
              {
                detail: answer.refusal.description,
              },
            );
          this.refusal = { at: this.now(), detail: answer.refusal.description };
        }
        return;
      case 'unanswered':
        // Only news while the server answers pings: otherwise the whole fabric is away.
        if (this.connected && this.unresponsiveSince === undefined) this.unansweredSince ??= this.now();
        return;
      default: {
        const unhandled: never = answer;
        return unhandled;
      }
    }
  }

  private async tick(): Promise<void> {
    if (this.closed) return;
    if (this.options.dataDir !== undefined)
      this.diskFree = await statfs(this.options.dataDir).then(
        (s) => s.bavail * s.bsize,
        () => undefined,
      );
    this.probe();
    this.kickIfSilent();
  }

  /** One ping at a time; a ping that takes longer than the timeout marks the server frozen until it returns. */
  private probe(): void {
    if (this.probing || !this.connected || this.options.nc.isClosed()) return;
    this.probing = true;
    const started = this.now();
    const timer = setTimeout(() => {
      if (this.unresponsiveSince !== undefined) return;
      this.unresponsiveSince = started;
      this.options.log(
        'error',
        `the NATS server does not answer (no reply to a ping within ${PROBE_TIMEOUT_MS} ms): frozen or overloaded`,
      );
    }, PROBE_TIMEOUT_MS);
    timer.unref();
    this.options.nc
      .flush()
      .then(
        () => {
          if (this.unresponsiveSince !== undefined) {
            this.options.log('info', 'the NATS server answers again', {
              frozen_for_ms: this.now() - this.unresponsiveSince,
            });
            this.unresponsiveSince = undefined;
            this.backAt = this.now();
          }
        },
        () => undefined,
      )
      .finally(() => {
        clearTimeout(timer);
        this.probing = false;
      });
  }

  /**
   * A spawned server that stopped answering after its disk filled is restarted once space is back:
   * nats-server 2.9 stays hung (pings unanswered, or JetStream silent) after a write failed for lack
   * of room, whatever space returns. A server frozen on a disk that never filled is left alone.
   */
  private kickIfSilent(): void {
    if (!this.options.restartServer) return;
    const now = this.now();
    const lowDisk = this.diskFree !== undefined && this.diskFree < LOW_DISK_BYTES;
    const troubleSince = this.unresponsiveSince ?? this.unansweredSince;
    if (troubleSince === undefined) {
      this.fullDuringTrouble = false;
      return;
    }
    if (lowDisk) this.fullDuringTrouble = true;
    if (lowDisk || !this.fullDuringTrouble) return; // no room yet, or not a full disk's hang
    const silentFor = this.silentFor();
    const hung =
      (this.unresponsiveSince !== undefined && now - this.unresponsiveSince >= JETSTREAM_SILENT_MS) ||
      (silentFor !== undefined && silentFor >= JETSTREAM_SILENT_MS);
    if (!hung || now - this.lastKick < KICK_INTERVAL_MS) return;
    this.lastKick = now;
    this.unansweredSince = undefined;
    this.fullDuringTrouble = false;
    this.options.log(
      'warn',
      `nats-server has not answered for ${Math.round((now - troubleSince) / 1000)} s since its disk filled, and the disk has room again: restarting it (nats-server 2.9 stays hung after a full disk)`,
    );
    this.options.restartServer();
  }

  private silentFor(): number | undefined {
    if (this.unansweredSince === undefined || !this.connected || this.unresponsiveSince !== undefined)
      return undefined;
    const silent = this.now() - this.unansweredSince;
    return silent >= PROBE_TIMEOUT_MS * 2 ? silent : undefined;
  }

  private silentReason(): string {
    return `JetStream has not answered a store for ${Math.round((this.silentFor() ?? 0) / 1000)} s`;
  }

  private storeFullReason(): string | undefined {
    if (this.diskFree !== undefined && this.diskFree < LOW_DISK_BYTES)
      return `the disk of the data dir (${this.options.dataDir ?? '?'}) has ${Math.round(this.diskFree / 1024)} KiB free: the JetStream store cannot write (free some space)`;
    if (this.refusal && this.now() - this.refusal.at < REFUSAL_COUNTS_MS)
      return `the JetStream store refuses writes: ${this.refusal.detail} (free some space, or raise nats.store_max_bytes)`;
    // The server's own word counts where the disk cannot be watched (its line stays for a minute:
    // on a watched disk, space that came back must not be refused that long).
    const logged = this.diskFree === undefined ? this.options.serverStore?.() : undefined;
    if (logged?.state === 'full') return `nats-server reports its store full: ${logged.detail ?? ''}`.trim();
    // Silent with a full disk behind it (nats-server 2.9): a storage trouble too.
    if (this.silentFor() !== undefined && this.diskFree !== undefined && this.diskFree < LOW_DISK_BYTES * 4)
      return `${this.silentReason()} and the disk is nearly full`;
    return undefined;
  }

  /** Why the fabric cannot be reached now (or, with `grace`, was not until a moment ago). */
  private unreachableReason(grace = true): string | undefined {
    const now = this.now();
    if (!this.connected)
      return `the connection to NATS is down for ${Math.round((now - (this.downSince ?? now)) / 1000)} s`;
    if (this.unresponsiveSince !== undefined)
      return `the NATS server has not answered for ${Math.round((now - this.unresponsiveSince) / 1000)} s (frozen?)`;
    if (grace && this.backAt !== undefined && now - this.backAt < REJOIN_GRACE_MS)
      return 'NATS is back since a moment; agents are rejoining';
    return undefined;
  }
}
