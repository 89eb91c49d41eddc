// Per-key quotas of events and bytes per minute, on fake time.
import { describe, expect, it } from 'vitest';
import { RateQuota } from '../../src/util/rateQuota.js';

function quota(eventsPerMinute: number, bytesPerMinute: number, maxKeys?: number) {
  let now = 0;
  const q = new RateQuota({
    eventsPerMinute,
    bytesPerMinute,
    now: () => now,
    ...(maxKeys ? { maxKeys } : {}),
  });
  return { q, advance: (ms: number) => (now += ms) };
}

describe('RateQuota', () => {
  it('lets a minute’s worth of events through at once, then the sustained rate', () => {
    const { q, advance } = quota(3, 1_000_000);
    expect([q.take('a', 1), q.take('a', 1), q.take('a', 1), q.take('a', 1)]).toEqual([
      true,
      true,
      true,
      false,
    ]);
    advance(20_000); // a third of a minute: one event back
    expect([q.take('a', 1), q.take('a', 1)]).toEqual([true, false]);
  });

  it('counts bytes too, and a refused event takes nothing', () => {
    const { q, advance } = quota(100, 1000);
    expect(q.take('a', 600)).toBe(true);
    expect(q.take('a', 600)).toBe(false);
    expect(q.take('a', 400)).toBe(true);
    expect(q.take('a', 1)).toBe(false);
    advance(60_000);
    expect(q.take('a', 1000)).toBe(true);
    // Never more than one minute's worth, however long the key was quiet.
    advance(10 * 60_000);
    expect(q.take('a', 1000)).toBe(true);
    expect(q.take('a', 1)).toBe(false);
  });

  it('keeps keys apart and bounds how many it remembers', () => {
    const { q } = quota(1, 1000, 2);
    expect([q.take('a', 1), q.take('b', 1), q.take('a', 1)]).toEqual([true, true, false]);
    q.take('c', 1);
    expect(q.size).toBe(2);
  });
});
