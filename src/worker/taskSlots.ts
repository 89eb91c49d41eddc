/**
 * Bounds how many handlers of one worker run at once. Every way a task reaches the worker (mesh
 * announcement, A2A, `/tasks/send`, MCP tool call) takes a slot here, so the bound holds for all.
 */
export class TaskSlots {
  private running = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`concurrency must be a positive integer, got ${capacity}`);
  }

  /** Handlers running now. */
  get busy(): number {
    return this.running;
  }

  /** True when a task taken now would start at once. */
  get hasFree(): boolean {
    return this.running < this.capacity;
  }

  /** Runs `fn` once a slot is free; tasks beyond the bound wait in arrival order. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.running >= this.capacity) await new Promise<void>((resolve) => this.waiters.push(resolve));
    else this.running++;
    try {
      return await fn();
    } finally {
      // Hand the slot straight to the next waiter, so a newcomer cannot overtake it.
      const next = this.waiters.shift();
      if (next) next();
      else this.running--;
    }
  }
}
