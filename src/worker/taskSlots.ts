/**
 * Bounds how many handlers of one worker run at once. Every way a task reaches the worker (mesh
 * announcement, A2A, `/tasks/send`, MCP tool call) takes a slot here, so the bound holds for all.
 */
export class TaskSlots {
  private running = 0;
  private readonly waiters: Array<() => void> = [];
  private readonly releaseListeners = new Set<() => void>();

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

  /**
   * Takes a slot once one is free (waiters are served in arrival order) and returns its release,
   * which must be called exactly once. The work-queue loop takes a slot before it pulls a task, so a
   * worker never holds a task it cannot start.
   */
  async acquire(): Promise<() => void> {
    if (this.running >= this.capacity) await new Promise<void>((resolve) => this.waiters.push(resolve));
    else this.running++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // Hand the slot straight to the next waiter, so a newcomer cannot overtake it.
      const next = this.waiters.shift();
      if (next) next();
      else {
        this.running--;
        for (const listener of this.releaseListeners) listener();
      }
    };
  }

  /** Calls `listener` whenever a slot becomes free (the work-queue loop asks for more then). */
  onRelease(listener: () => void): () => void {
    this.releaseListeners.add(listener);
    return () => this.releaseListeners.delete(listener);
  }

  /** Runs `fn` in a slot (taken now, or `held` when the caller already has one). */
  async run<T>(fn: () => Promise<T>, held?: () => void): Promise<T> {
    const release = held ?? (await this.acquire());
    try {
      return await fn();
    } finally {
      release();
    }
  }
}
