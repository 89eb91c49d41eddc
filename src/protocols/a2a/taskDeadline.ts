/**
 * The requester's deadline of one A2A task through the coordinator. A task is waited on in two
 * ways: while the mesh works on it, for its result (`openai.request_timeout_seconds`, counted afresh
 * from each message the client sends); while it is input-required, for the client's next message
 * (`a2a.input_ttl_seconds`, default a day: the client may be a person). One timer runs at a time;
 * when it runs out, `onExpired` is told which wait it was, with a sentence for the client.
 */

/** setTimeout's ceiling (2^31 - 1 ms, about 24.8 days); a longer delay would fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Which wait ran out. */
export type DeadlineKind = 'result' | 'input';

export interface DeadlineLimits {
  /** How long the mesh may take to answer one message. */
  resultMs: number;
  /** How long the task may wait in input-required for the client's next message. */
  inputMs: number;
}

export class TaskDeadline {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly limits: DeadlineLimits,
    private readonly onExpired: (kind: DeadlineKind, message: string) => void,
  ) {}

  /** The mesh works on the task (it started, or took the client's next message). */
  working(): void {
    this.arm('result', this.limits.resultMs, `no result from the mesh within ${this.limits.resultMs} ms`);
  }

  /** The task waits for the client's next message. */
  waitingForInput(): void {
    const seconds = Math.round(this.limits.inputMs / 1000);
    this.arm(
      'input',
      this.limits.inputMs,
      `no reply to the agent's request for input within ${seconds} s (a2a.input_ttl_seconds)`,
    );
  }

  /** The task ended: no wait is left. */
  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(kind: DeadlineKind, ms: number, message: string): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.onExpired(kind, message);
      },
      Math.min(Math.max(ms, 1), MAX_TIMER_MS),
    );
    // A task waiting for its client is no reason to keep a stopping process alive.
    this.timer.unref();
  }
}
