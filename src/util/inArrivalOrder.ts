/**
 * Runs handlers in the order their inputs arrived, although the inputs become ready out of order
 * (each is a value or a promise of one). What is ready waits only for what arrived before it; a
 * promise that rejects is handed on as its error, so one failure cannot hold the queue up.
 */
type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

interface Entry<T> {
  settled: Settled<T> | undefined;
  handle: (value: T) => void;
}

export class InArrivalOrder<T> {
  private entries: Entry<T>[] = [];
  private head = 0;
  private closed = false;

  /** @param onError told of a handler that threw, or an input that rejected. */
  constructor(private readonly onError: (err: unknown) => void) {}

  /** Inputs arrived and not yet handled. */
  get pending(): number {
    return this.entries.length - this.head;
  }

  /** Queues `input`; `handle` runs once it and every input added before it are ready. */
  add(input: T | Promise<T>, handle: (value: T) => void): void {
    if (this.closed) return;
    const entry: Entry<T> = { settled: undefined, handle };
    this.entries.push(entry);
    if (input instanceof Promise) {
      input.then(
        (value) => this.settle(entry, { ok: true, value }),
        (error: unknown) => this.settle(entry, { ok: false, error }),
      );
    } else this.settle(entry, { ok: true, value: input });
  }

  /** Drops everything queued: their handlers never run. */
  close(): void {
    this.closed = true;
    this.entries = [];
    this.head = 0;
  }

  private settle(entry: Entry<T>, settled: Settled<T>): void {
    entry.settled = settled;
    while (!this.closed && this.head < this.entries.length) {
      const next = this.entries[this.head]!;
      if (next.settled === undefined) break;
      this.head++;
      try {
        if (next.settled.ok) next.handle(next.settled.value);
        else this.onError(next.settled.error);
      } catch (err) {
        this.onError(err);
      }
    }
    // Handled entries are dropped in one go once they are half the array (amortised O(1) per entry).
    if (this.head > 64 && this.head * 2 >= this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}
