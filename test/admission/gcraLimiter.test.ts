import { describe, expect, it } from 'vitest';
import { GcraLimiter } from '../../src/util/gcraLimiter.js';
import { BoundedCache } from '../../src/util/boundedCache.js';

describe('GCRA limiter', () => {
  it('allows the burst, then the sustained rate, per key', () => {
    let now = 0;
    const limiter = new GcraLimiter({ ratePerSecond: 10, burst: 3, now: () => now });
    expect([1, 2, 3, 4].map(() => limiter.allow('a'))).toEqual([true, true, true, false]);
    expect(limiter.allow('b')).toBe(true); // keys are independent
    expect(limiter.retryAfterMs('a')).toBeGreaterThan(0);
    now += 100;
    expect(limiter.allow('a')).toBe(true);
    expect(limiter.allow('a')).toBe(false);
  });

  it('never tracks more keys than its bound', () => {
    const limiter = new GcraLimiter({ ratePerSecond: 1, burst: 1, maxKeys: 100 });
    for (let i = 0; i < 10_000; i++) limiter.allow(`k${i}`);
    expect(limiter.size).toBeLessThanOrEqual(100);
  });
});

describe('bounded cache', () => {
  it('expires entries and stays within its bound', () => {
    let now = 0;
    const cache = new BoundedCache<number>(10, 1000, () => now);
    for (let i = 0; i < 50; i++) cache.set(`k${i}`, i);
    expect(cache.size).toBe(10);
    expect(cache.get('k49')).toBe(49);
    expect(cache.get('k0')).toBeUndefined();
    now += 1001;
    expect(cache.get('k49')).toBeUndefined();
  });
});
