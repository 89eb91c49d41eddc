// A mesh task's claim is held back a moment (worker/deferredClaims.ts): sent when its time is up
// or when the task says something else first, never when its final comes first.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CLAIM_HOLD_MS, DeferredClaims } from '../../src/worker/deferredClaims.js';

describe('DeferredClaims', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends a held claim once its time is up, and only once', () => {
    const claims = new DeferredClaims();
    const sent: string[] = [];
    claims.hold('t1', () => sent.push('t1'));
    vi.advanceTimersByTime(CLAIM_HOLD_MS - 1);
    expect(sent).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual(['t1']);
    claims.flush('t1');
    vi.advanceTimersByTime(10 * CLAIM_HOLD_MS);
    expect(sent).toEqual(['t1']);
    expect(claims.size).toBe(0);
  });

  it('sends it at once when flushed (the task says something else first), not again later', () => {
    const claims = new DeferredClaims();
    const sent: string[] = [];
    claims.hold('t1', () => sent.push('t1'));
    claims.hold('t2', () => sent.push('t2'));
    claims.flush('t2');
    expect(sent).toEqual(['t2']);
    vi.advanceTimersByTime(CLAIM_HOLD_MS);
    expect(sent).toEqual(['t2', 't1']);
  });

  it('never sends a dropped claim (its final came first), and leaves the others held', () => {
    const claims = new DeferredClaims();
    const sent: string[] = [];
    claims.hold('t1', () => sent.push('t1'));
    claims.hold('t2', () => sent.push('t2'));
    claims.drop('t1');
    claims.flush('t1');
    vi.advanceTimersByTime(CLAIM_HOLD_MS);
    expect(sent).toEqual(['t2']);
    expect(claims.size).toBe(0);
  });

  it('keeps one claim per task: holding again replaces the earlier one', () => {
    const claims = new DeferredClaims(5);
    const sent: string[] = [];
    claims.hold('t1', () => sent.push('first'));
    claims.hold('t1', () => sent.push('second'));
    vi.advanceTimersByTime(5);
    expect(sent).toEqual(['second']);
  });
});
