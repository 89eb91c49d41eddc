/**
 * A handler's timeout counts the handler's own time: a wait for its requester's input (RunPauses)
 * is not counted, so a person may answer after the timeout would have run out, and the timeout still
 * ends a handler that works too long after the wait. Fake timers: no test waits in real time.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { boundRun, RunPauses } from '../../src/worker/handlerTimeout.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A handler run that ends when the test says so. */
function handlerRun(): { running: Promise<string>; finish: (value: string) => void } {
  let finish!: (value: string) => void;
  const running = new Promise<string>((resolve) => (finish = resolve));
  return { running, finish };
}

describe('boundRun with RunPauses', () => {
  it('does not count a wait for input against the timeout', async () => {
    const { running, finish } = handlerRun();
    const pauses = new RunPauses();
    let aborted = false;
    const bounded = boundRun(running, 1_000, () => (aborted = true), pauses);
    await vi.advanceTimersByTimeAsync(600);
    const resume = pauses.pause();
    expect(pauses.paused).toBe(true);
    // An hour waiting for a person.
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(aborted).toBe(false);
    resume();
    await vi.advanceTimersByTimeAsync(300);
    finish('answered');
    await expect(bounded).resolves.toEqual({ kind: 'settled', value: 'answered' });
    expect(aborted).toBe(false);
  });

  it('ends the run when its own time, before and after the wait, passes the timeout', async () => {
    const { running } = handlerRun();
    const pauses = new RunPauses();
    let aborted = false;
    const bounded = boundRun(running, 1_000, () => (aborted = true), pauses);
    await vi.advanceTimersByTimeAsync(600);
    const resume = pauses.pause();
    await vi.advanceTimersByTimeAsync(10_000);
    resume();
    await vi.advanceTimersByTimeAsync(399);
    expect(aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(1_000);
    await expect(bounded).resolves.toMatchObject({ kind: 'timed_out', stuck: true });
  });

  it('counts on only when every wait has ended, and an ended wait ends once', async () => {
    const { running } = handlerRun();
    const pauses = new RunPauses();
    let aborted = false;
    void boundRun(running, 1_000, () => (aborted = true), pauses);
    const first = pauses.pause();
    const second = pauses.pause();
    first();
    first();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(pauses.paused).toBe(true);
    expect(aborted).toBe(false);
    second();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(aborted).toBe(true);
  });

  it('times out as before without pauses', async () => {
    const { running } = handlerRun();
    let aborted = false;
    void boundRun(running, 1_000, () => (aborted = true));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(aborted).toBe(true);
  });
});
