// Handlers run in arrival order although their inputs become ready out of order, a rejected input
// or a throwing handler does not hold the queue up, and close() drops what waits.
import { describe, expect, it } from 'vitest';
import { InArrivalOrder } from '../../src/util/inArrivalOrder.js';

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('InArrivalOrder', () => {
  it('a ready input waits for the ones that arrived before it', async () => {
    const errors: unknown[] = [];
    const queue = new InArrivalOrder<string>((err) => errors.push(err));
    const handled: string[] = [];
    const slow = deferred<string>();
    queue.add(slow.promise, (v) => handled.push(v));
    queue.add('ready at once', (v) => handled.push(v));
    const middle = deferred<string>();
    queue.add(middle.promise, (v) => handled.push(v));
    middle.resolve('middle');
    await middle.promise;
    expect(handled).toEqual([]);
    expect(queue.pending).toBe(3);
    slow.resolve('slow');
    await slow.promise;
    await Promise.resolve();
    expect(handled).toEqual(['slow', 'ready at once', 'middle']);
    expect(queue.pending).toBe(0);
    expect(errors).toEqual([]);
  });

  it('a rejected input and a throwing handler are reported and the rest go on', async () => {
    const errors: unknown[] = [];
    const queue = new InArrivalOrder<number>((err) => errors.push(err));
    const handled: number[] = [];
    const failing = deferred<number>();
    queue.add(failing.promise, (v) => handled.push(v));
    queue.add(2, () => {
      throw new Error('handler failed');
    });
    queue.add(3, (v) => handled.push(v));
    failing.reject(new Error('input failed'));
    await failing.promise.catch(() => undefined);
    await Promise.resolve();
    expect(handled).toEqual([3]);
    expect(errors.map((e) => (e as Error).message)).toEqual(['input failed', 'handler failed']);
  });

  it('keeps order across many entries and handlers that add more', async () => {
    const queue = new InArrivalOrder<number>(() => undefined);
    const handled: number[] = [];
    const gates = Array.from({ length: 300 }, () => deferred<number>());
    gates.forEach((g, i) =>
      queue.add(g.promise, (v) => {
        handled.push(v);
        if (i === 0) queue.add(1000, (w) => handled.push(w));
      }),
    );
    // Resolved back to front: nothing can run until the first one is ready.
    for (let i = gates.length - 1; i >= 0; i--) gates[i]!.resolve(i);
    await Promise.all(gates.map((g) => g.promise));
    await Promise.resolve();
    expect(handled).toEqual([...Array.from({ length: 300 }, (_, i) => i), 1000]);
  });

  it('close() drops what waits and refuses what comes after', async () => {
    const queue = new InArrivalOrder<number>(() => undefined);
    const handled: number[] = [];
    const gate = deferred<number>();
    queue.add(gate.promise, (v) => handled.push(v));
    queue.add(2, (v) => handled.push(v));
    queue.close();
    queue.add(3, (v) => handled.push(v));
    gate.resolve(1);
    await gate.promise;
    await Promise.resolve();
    expect(handled).toEqual([]);
    expect(queue.pending).toBe(0);
  });
});
