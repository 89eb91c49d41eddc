/**
 * Reports admission denials without letting a flood of bad advertisements become a flood of events:
 * the same (source, reason, agent) is reported once per window, all denials together at most
 * `ratePerSecond`, and whatever was held back is summed up in one `denials_suppressed` warning per
 * interval. Every denial is still counted.
 */
import type { PolicyNotices } from '../registry/policyNotices.js';
import type { PolicyPayload } from '../events/payloads.js';
import { BoundedCache } from '../util/boundedCache.js';
import { GcraLimiter } from '../util/gcraLimiter.js';

export class DenialReporter {
  private readonly recent = new BoundedCache<true>(20_000, 10_000);
  private readonly global: GcraLimiter;
  private suppressed = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly notices: PolicyNotices,
    options: {
      ratePerSecond?: number;
      burst?: number;
      summaryIntervalMs?: number;
      /** The limiter's clock (ms); `Date.now` unless a test holds time still. */
      now?: () => number;
    } = {},
  ) {
    this.global = new GcraLimiter({
      ratePerSecond: options.ratePerSecond ?? 50,
      burst: options.burst ?? 100,
      maxKeys: 1,
      ...(options.now ? { now: options.now } : {}),
    });
    this.timer = setInterval(() => this.flushSummary(), options.summaryIntervalMs ?? 10_000);
    this.timer.unref();
  }

  /** Total denials held back so far in the current interval. */
  get suppressedCount(): number {
    return this.suppressed;
  }

  /** Publishes `amf.policy.deny` for this denial unless it repeats or the global budget is spent. */
  deny(dedupeKey: string, payload: PolicyPayload): void {
    if (this.recent.get(dedupeKey) || !this.global.allow('all')) {
      this.suppressed++;
      return;
    }
    this.recent.set(dedupeKey, true);
    this.notices.deny(payload);
  }

  private flushSummary(): void {
    if (this.suppressed === 0) return;
    const count = this.suppressed;
    this.suppressed = 0;
    this.notices.warn({
      reason: 'denials_suppressed',
      message: `${count} further advertisement denials were not reported individually (repeats or over the reporting budget)`,
      details: { count },
    });
  }

  close(): void {
    clearInterval(this.timer);
    this.flushSummary();
  }
}
