/**
 * Per-key quotas of events and bytes per minute: two token buckets per key, each holding at most
 * one minute's worth and refilled continuously, so a key may send a minute's allowance at once and
 * then at the sustained rate. No timers, O(1) per decision; the key table is bounded, and when full
 * the least recently used key is forgotten, which can only make the quota more lenient for that
 * key, never grow memory.
 */
import { AmfError } from '../errors.js';
export interface RateQuotaOptions {
  eventsPerMinute: number;
  bytesPerMinute: number;
  /** Upper bound on tracked keys (default 10,000). */
  maxKeys?: number;
  now?: () => number;
}

interface Buckets {
  events: number;
  bytes: number;
  at: number;
}

const MINUTE_MS = 60_000;

export class RateQuota {
  private readonly keys = new Map<string, Buckets>();
  private readonly maxKeys: number;
  private readonly now: () => number;

  constructor(private readonly options: RateQuotaOptions) {
    if (!(options.eventsPerMinute > 0) || !(options.bytesPerMinute > 0))
      throw new AmfError('CONFIG_INVALID', 'a rate quota needs eventsPerMinute > 0 and bytesPerMinute > 0');
    this.maxKeys = options.maxKeys ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * True when one more event of `bytes` from `key` fits both allowances; it is then counted. A
   * refused event counts nothing, so a key that stops sending is whole again after a minute.
   */
  take(key: string, bytes: number): boolean {
    const { eventsPerMinute, bytesPerMinute } = this.options;
    const now = this.now();
    const known = this.keys.get(key);
    const elapsed = known ? Math.max(0, now - known.at) : 0;
    const b: Buckets = known
      ? {
          events: Math.min(eventsPerMinute, known.events + (elapsed * eventsPerMinute) / MINUTE_MS),
          bytes: Math.min(bytesPerMinute, known.bytes + (elapsed * bytesPerMinute) / MINUTE_MS),
          at: now,
        }
      : { events: eventsPerMinute, bytes: bytesPerMinute, at: now };
    const fits = b.events >= 1 && b.bytes >= bytes;
    if (fits) {
      b.events -= 1;
      b.bytes -= bytes;
    }
    // Re-inserted so the Map's order is least recently used first.
    this.keys.delete(key);
    this.keys.set(key, b);
    if (this.keys.size > this.maxKeys) {
      const oldest = this.keys.keys().next().value;
      if (oldest !== undefined) this.keys.delete(oldest);
    }
    return fits;
  }

  get size(): number {
    return this.keys.size;
  }
}
