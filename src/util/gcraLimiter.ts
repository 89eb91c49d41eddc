/**
 * Per-key rate limiting with GCRA (the generic cell rate algorithm): one timestamp per key, no
 * timers, O(1) per decision. The key table is bounded; when full, the stalest key is forgotten,
 * which can only make the limiter more lenient for that key, never grow memory.
 */
import { AmfError } from '../errors.js';
export interface GcraOptions {
  /** Sustained rate allowed per key. */
  ratePerSecond: number;
  /** How many requests may arrive at once above the sustained rate. */
  burst: number;
  /** Upper bound on tracked keys. */
  maxKeys?: number;
  now?: () => number;
}

export class GcraLimiter {
  private readonly tat = new Map<string, number>();
  private readonly intervalMs: number;
  private readonly toleranceMs: number;
  private readonly maxKeys: number;
  private readonly now: () => number;

  constructor(options: GcraOptions) {
    if (!(options.ratePerSecond > 0) || !(options.burst >= 1))
      throw new AmfError('CONFIG_INVALID', 'GCRA needs ratePerSecond > 0 and burst >= 1');
    this.intervalMs = 1000 / options.ratePerSecond;
    this.toleranceMs = this.intervalMs * (options.burst - 1);
    this.maxKeys = options.maxKeys ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** True when a request for `key` conforms; a conforming request is counted. */
  allow(key: string): boolean {
    const now = this.now();
    const tat = Math.max(this.tat.get(key) ?? now, now);
    if (tat - now > this.toleranceMs) return false;
    this.tat.delete(key); // re-insert so Map order is least-recently-used first
    this.tat.set(key, tat + this.intervalMs);
    if (this.tat.size > this.maxKeys) {
      const oldest = this.tat.keys().next().value;
      if (oldest !== undefined) this.tat.delete(oldest);
    }
    return true;
  }

  /** Milliseconds until `key` may send again (0 when it may now). */
  retryAfterMs(key: string): number {
    const tat = this.tat.get(key);
    if (tat === undefined) return 0;
    return Math.max(0, tat - this.now() - this.toleranceMs);
  }

  get size(): number {
    return this.tat.size;
  }
}
