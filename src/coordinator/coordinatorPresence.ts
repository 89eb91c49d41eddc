/**
 * Which coordinators on this NATS are running. Each writes its sign of life to the leases bucket
 * (`coordinator.<instance id>`) every second; a coordinator is judged stopped once its entry's
 * revision has not changed for `ttlMs` on the judge's own monotonic clock (no synchronised clocks,
 * as for the lease in leaderLease.ts). A clean stop deletes its entry; a killed coordinator's entry
 * stays until whoever took over its open tasks forgets it (orphanSweep.ts).
 */
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { KV } from '@nats-io/kv';
import { AmfError } from '../errors.js';

const KEY_PREFIX = 'coordinator.';
export const DEFAULT_PRESENCE_RENEW_MS = 1_000;
export const DEFAULT_PRESENCE_TTL_MS = 10_000;

export interface CoordinatorPresenceOptions {
  /** The leases bucket (`amf_leases`: read from its stream leader, see jetstream.ts). */
  kv: KV;
  instanceId: string;
  renewIntervalMs?: number;
  /** How long an unchanged entry means its coordinator stopped; at least 3 × renew. */
  ttlMs?: number;
  now?: () => number;
  onError?: (err: unknown) => void;
  /**
   * A digest of this coordinator's join password (never the password): every coordinator may
   * answer a worker's login through the auth callout, so they must share one (docs/cluster.md).
   */
  joinDigest?: string;
  /** Called once per other coordinator whose entry names another join password. */
  onJoinMismatch?: (instance: string) => void;
}

export class CoordinatorPresence {
  readonly instanceId: string;
  private readonly kv: KV;
  private readonly renewIntervalMs: number;
  private readonly ttlMs: number;
  private readonly now: () => number;
  private readonly onError: (err: unknown) => void;
  /** Other coordinators' entries as last read: their revision and since when it is unchanged. */
  private readonly observed = new Map<string, { revision: number; since: number }>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly joinDigest: string | undefined;
  private readonly onJoinMismatch: (instance: string) => void;
  /** Coordinators already reported with another join password. */
  private readonly mismatched = new Set<string>();

  constructor(opts: CoordinatorPresenceOptions) {
    this.kv = opts.kv;
    this.instanceId = opts.instanceId;
    this.renewIntervalMs = opts.renewIntervalMs ?? DEFAULT_PRESENCE_RENEW_MS;
    this.ttlMs = opts.ttlMs ?? DEFAULT_PRESENCE_TTL_MS;
    this.now = opts.now ?? (() => performance.now());
    this.onError = opts.onError ?? (() => undefined);
    this.joinDigest = opts.joinDigest;
    this.onJoinMismatch = opts.onJoinMismatch ?? (() => undefined);
    if (!(this.ttlMs >= 3 * this.renewIntervalMs))
      throw new AmfError(
        'CONFIG_INVALID',
        `presence ttlMs (${this.ttlMs}) must be at least 3 × renewIntervalMs`,
      );
  }

  /** Writes this coordinator's entry now and then every renew interval. */
  start(): this {
    if (this.timer || this.closed) return this;
    const value = JSON.stringify({
      instance: this.instanceId,
      ...(this.joinDigest ? { join_digest: this.joinDigest } : {}),
    });
    const renew = () => {
      this.writing = this.kv
        .put(presenceKey(this.instanceId), value)
        .catch((err: unknown) => this.onError(err));
    };
    renew();
    void this.checkJoinPasswords().catch((err: unknown) => this.onError(err));
    this.timer = setInterval(renew, this.renewIntervalMs);
    this.timer.unref();
    return this;
  }

  /** The other coordinators whose entry has not changed for the TTL: stopped without a goodbye. */
  async stopped(): Promise<string[]> {
    const seen = new Set<string>();
    const stopped: string[] = [];
    const keys = await this.kv.keys(`${KEY_PREFIX}>`);
    for await (const key of keys) {
      const instance = key.slice(KEY_PREFIX.length);
      if (instance === this.instanceId) continue;
      const entry = await this.kv.get(key);
      if (!entry || entry.operation !== 'PUT') continue;
      seen.add(instance);
      const last = this.observed.get(instance);
      if (!last || last.revision !== entry.revision)
        this.observed.set(instance, { revision: entry.revision, since: this.now() });
      else if (this.now() - last.since >= this.ttlMs) stopped.push(instance);
    }
    for (const instance of this.observed.keys()) if (!seen.has(instance)) this.observed.delete(instance);
    return stopped;
  }

  /** Reports every other coordinator whose entry names another join password than ours. */
  async checkJoinPasswords(): Promise<void> {
    if (!this.joinDigest) return;
    for await (const key of await this.kv.keys(`${KEY_PREFIX}>`)) {
      const instance = key.slice(KEY_PREFIX.length);
      if (instance === this.instanceId || this.mismatched.has(instance)) continue;
      const entry = await this.kv.get(key);
      if (!entry || entry.operation !== 'PUT') continue;
      const { join_digest: digest } = entry.json<{ join_digest?: string }>();
      if (digest !== undefined && digest !== this.joinDigest) {
        this.mismatched.add(instance);
        this.onJoinMismatch(instance);
      }
    }
  }

  /** Deletes a stopped coordinator's entry (its open tasks are all ended). */
  async forget(instance: string): Promise<void> {
    this.observed.delete(instance);
    await this.kv.delete(presenceKey(instance));
  }

  /** Stops renewing and deletes this coordinator's entry: a clean stop leaves no open tasks. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.writing;
    await this.kv.delete(presenceKey(this.instanceId)).catch((err: unknown) => this.onError(err));
  }
}

function presenceKey(instance: string): string {
  return KEY_PREFIX + instance;
}

/** A digest of a join password for presence entries: shows a mismatch, reveals nothing. */
export function joinPasswordDigest(password: string): string {
  return createHash('sha256')
    .update('amf-join-digest-v1\0')
    .update(password)
    .digest('base64url')
    .slice(0, 16);
}
