/**
 * A lease that lets exactly one of several coordinators on the same NATS do a job alone (the
 * registry sweep's shared writes; later the expiry of tasks adopted from a dead coordinator).
 *
 * The lease is one KV key whose value is the holder's instance id. Every write is a
 * compare-and-set on the key's revision (create when absent, update with the revision read), so
 * JetStream — not our code — decides between two coordinators racing for it; on a cluster that
 * decision is made by the stream's RAFT leader and is replicated like any other write.
 *
 * Expiry needs no synchronised wall clocks: the holder rewrites the key every `renewIntervalMs`,
 * and a contender takes the lease over only after it has seen the *same revision* for `ttlMs` on its
 * own monotonic clock. The holder, in turn, counts itself holder only until
 * `sentAt + ttlMs - renewIntervalMs`, where `sentAt` is when it sent its last successful write —
 * a moment before the contender can have first seen that revision — so the old holder steps down
 * before anyone else can step up, as long as both clocks run at about the same rate.
 */
import type { LogFn } from '../log.js';
import { performance } from 'node:perf_hooks';
import type { KV, KvEntry } from '@nats-io/kv';
import { AmfError } from '../errors.js';

/** Options of {@link LeaderLease}. */
export interface LeaderLeaseOptions {
  /** The bucket holding the lease (`amf_leases`); it must not serve direct gets (see jetstream.ts). */
  kv: KV;
  /** The lease's key, e.g. `sweeper`. */
  key: string;
  /** Who holds it: the coordinator's instance id. */
  holderId: string;
  /** How often the holder renews and a contender looks; default 1000 ms. */
  renewIntervalMs?: number;
  /** How long a lease outlives its holder's last renewal; default 5000 ms, at least 3 × renew. */
  ttlMs?: number;
  /** Errors talking to NATS (they never throw out of the lease: it just keeps trying). */
  onError?: (err: unknown) => void;
  /** A monotonic clock in ms (tests may inject one); default `performance.now`. */
  now?: () => number;
}

/** Why a holder stopped holding. */
export type LeaseLossReason = 'taken_over' | 'not_renewed' | 'closed';

export const DEFAULT_LEASE_RENEW_MS = 1000;
export const DEFAULT_LEASE_TTL_MS = 5000;

/** One coordinator's side of a lease: it competes for it, renews it while held, and gives it back. */
export class LeaderLease {
  private readonly kv: KV;
  private readonly key: string;
  readonly holderId: string;
  readonly renewIntervalMs: number;
  readonly ttlMs: number;
  private readonly now: () => number;
  private readonly onError: (err: unknown) => void;
  private readonly acquiredListeners = new Set<() => void>();
  private readonly lostListeners = new Set<(reason: LeaseLossReason) => void>();
  private held = false;
  /** Revision of our last successful write while held. */
  private revision = 0;
  /** While held: the last moment (monotonic ms) at which we may still act as holder. */
  private validUntil = 0;
  /** While not held: the other holder's revision we are watching, and when we first saw it. */
  private observed: { revision: number; since: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private started = false;
  private closed = false;

  constructor(opts: LeaderLeaseOptions) {
    this.kv = opts.kv;
    this.key = opts.key;
    this.holderId = opts.holderId;
    this.renewIntervalMs = opts.renewIntervalMs ?? DEFAULT_LEASE_RENEW_MS;
    this.ttlMs = opts.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    this.now = opts.now ?? (() => performance.now());
    this.onError = opts.onError ?? (() => undefined);
    if (!(this.renewIntervalMs > 0) || !(this.ttlMs >= 3 * this.renewIntervalMs)) {
      // Below 3 × renew the holder's validity window (ttl - renew) leaves less than one renewal
      // of slack, so a single slow round trip would make it step down while it is healthy.
      throw new AmfError(
        'CONFIG_INVALID',
        `lease ${opts.key}: ttlMs (${this.ttlMs}) must be at least 3 × renewIntervalMs (${this.renewIntervalMs})`,
      );
    }
  }

  /**
   * Starts competing for the lease; the first attempt runs at once. Separate from the constructor
   * so an owner can hand the lease out (and others subscribe) before anything can be acquired.
   */
  start(): this {
    if (!this.started && !this.closed) {
      this.started = true;
      this.schedule(0);
    }
    return this;
  }

  /** True while this instance holds the lease and its last renewal is recent enough to act on. */
  get isHolder(): boolean {
    return this.held && this.now() < this.validUntil;
  }

  /** Called each time this instance becomes the holder; returns an unsubscribe function. */
  onAcquired(listener: () => void): () => void {
    this.acquiredListeners.add(listener);
    return () => this.acquiredListeners.delete(listener);
  }

  /** Called each time this instance stops being the holder; returns an unsubscribe function. */
  onLost(listener: (reason: LeaseLossReason) => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  /**
   * Stops competing and, if held, gives the lease back by deleting the key at our revision, so a
   * contender takes over on its next look instead of waiting out the TTL.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    await this.ticking;
    if (this.held) {
      const revision = this.revision;
      this.lose('closed');
      await this.kv.delete(this.key, { previousSeq: revision }).catch((err: unknown) => this.onError(err));
    }
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick().finally(() => this.schedule(this.renewIntervalMs));
    }, ms);
    // A lease is never a reason to keep a process alive.
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.held && this.now() >= this.validUntil) this.lose('not_renewed');
    try {
      if (this.held) await this.renew();
      else await this.contend();
    } catch (err) {
      // NATS unreachable, a leader election under way, a timeout: try again next tick. A holder
      // that cannot renew steps down by itself when validUntil passes.
      this.onError(err);
    }
  }

  private async renew(): Promise<void> {
    const sentAt = this.now();
    try {
      this.revision = await this.kv.update(this.key, this.encode(), this.revision);
      this.validUntil = sentAt + this.ttlMs - this.renewIntervalMs;
      return;
    } catch (err) {
      // Either someone else wrote the key (we lost it) or our last write landed without its ack
      // reaching us (the key still names us at a newer revision): only a read tells them apart.
      const entry = await this.kv.get(this.key);
      if (entry && isLive(entry) && this.isOurs(entry)) {
        this.revision = entry.revision;
        throw err;
      }
      if (this.closed) return;
      this.lose('taken_over');
      if (entry) this.observe(entry);
    }
  }

  private async contend(): Promise<void> {
    const entry = await this.kv.get(this.key);
    if (!entry || !isLive(entry)) {
      // Never held, or given back: create() succeeds for one contender only.
      await this.write(() => this.kv.create(this.key, this.encode()));
      return;
    }
    if (this.isOurs(entry)) {
      // A write of ours outlived our holding (e.g. its ack was lost): nobody has written since.
      await this.write(() => this.kv.update(this.key, this.encode(), entry.revision));
      return;
    }
    this.observe(entry);
    const seen = this.observed;
    if (seen && this.now() - seen.since >= this.ttlMs) {
      // The holder has been silent for a whole TTL: take over, at the revision we watched, so a
      // renewal or another contender that wrote in between makes this fail instead.
      await this.write(() => this.kv.update(this.key, this.encode(), entry.revision));
    }
  }

  private observe(entry: KvEntry): void {
    if (this.observed?.revision !== entry.revision) {
      this.observed = { revision: entry.revision, since: this.now() };
    }
  }

  private async write(attempt: () => Promise<number>): Promise<void> {
    const sentAt = this.now();
    let revision: number;
    try {
      revision = await attempt();
    } catch (err) {
      // Losing the race (wrong last sequence / key exists) is the normal outcome for all but one.
      this.onError(err);
      return;
    }
    if (this.closed) {
      await this.kv.delete(this.key, { previousSeq: revision }).catch((e: unknown) => this.onError(e));
      return;
    }
    this.revision = revision;
    this.validUntil = sentAt + this.ttlMs - this.renewIntervalMs;
    this.held = true;
    this.observed = undefined;
    for (const l of [...this.acquiredListeners]) l();
  }

  private lose(reason: LeaseLossReason): void {
    if (!this.held) return;
    this.held = false;
    this.validUntil = 0;
    for (const l of [...this.lostListeners]) l(reason);
  }

  private isOurs(entry: KvEntry): boolean {
    return entry.string() === this.holderId;
  }

  private encode(): string {
    return this.holderId;
  }
}

function isLive(entry: KvEntry): boolean {
  return entry.operation === 'PUT';
}

/** Key of the sweeper lease in the `amf_leases` bucket. */
export const SWEEPER_LEASE_KEY = 'sweeper';

/** The lease of the coordinator that writes sweep decisions into shared state. */
export function sweeperLease(kv: LeaderLeaseOptions['kv'], holderId: string, log: LogFn): LeaderLease {
  return new LeaderLease({
    kv,
    key: SWEEPER_LEASE_KEY,
    holderId,
    // Losing a race or a NATS hiccup is routine for a lease: worth a debug line, not a warning.
    onError: (err) =>
      log('debug', 'sweeper lease attempt failed', { err: err instanceof Error ? err.message : String(err) }),
  });
}
