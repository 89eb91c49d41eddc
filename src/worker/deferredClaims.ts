/**
 * Claims of mesh tasks held back for a moment. A handler that answers within it sends no claim of
 * its own: its final names the offer it took, which is all a claim proves, and the coordinator
 * records the claim for it (coordinator/tasks/results.ts). A task that says anything else first
 * (progress, a partial, a question, a delegation) or runs longer sends its claim before that, as
 * it always did. For a task that answers at once this saves a signed event, its trip and its record.
 */

/** How long a mesh task's claim waits for its final before it leaves anyway. */
export const CLAIM_HOLD_MS = 20;

interface HeldClaim {
  timer: NodeJS.Timeout;
  send: () => void;
}

export class DeferredClaims {
  private readonly held = new Map<string, HeldClaim>();

  constructor(private readonly holdMs: number = CLAIM_HOLD_MS) {}

  /** Holds `send` (the claim of `taskId`) until it is flushed, dropped, or its time is up. */
  hold(taskId: string, send: () => void): void {
    this.drop(taskId);
    const timer = setTimeout(() => this.flush(taskId), this.holdMs);
    timer.unref();
    this.held.set(taskId, { timer, send });
  }

  /** Sends the held claim of `taskId` now: the task is about to say something else first. */
  flush(taskId: string): void {
    const claim = this.take(taskId);
    claim?.send();
  }

  /** Forgets the held claim of `taskId`: its final carries it, or the task ended without one. */
  drop(taskId: string): void {
    this.take(taskId);
  }

  get size(): number {
    return this.held.size;
  }

  private take(taskId: string): HeldClaim | undefined {
    const claim = this.held.get(taskId);
    if (!claim) return undefined;
    this.held.delete(taskId);
    clearTimeout(claim.timer);
    return claim;
  }
}
