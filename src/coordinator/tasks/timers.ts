/**
 * The clock and the one timer each owned task runs: the TTL while it waits for a claim, the retry
 * delay between attempts, the watchdog while a worker holds it. The timers only notice that time is
 * up; what follows (retry, expiry, giving up on a worker) is decided by their handlers.
 */
import type { TaskRecord } from './record.js';

/** A running timer: Node's Timeout for the system clock, anything a fake clock chooses for tests. */
export type TimerHandle = NodeJS.Timeout | number;

/** Time and timers as the lifecycle uses them, injectable so TTL and watchdog rules run without waiting. */
export interface LifecycleClock {
  now(): number;
  /** Calls `fn` once after `ms`; the timer must not keep the process alive. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle | undefined): void;
}

export const systemClock: LifecycleClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    // A task waiting for its TTL is no reason to keep a shutting-down process alive.
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle),
};

/** What happens when a timer runs out. */
export interface TimerHandlers {
  /** An announced task was not claimed within its TTL. */
  ttlExpired(task: TaskRecord): void;
  /** The delay before the next attempt is over. */
  retryDue(task: TaskRecord): void;
  /** The claimant showed no sign of life for the whole watchdog window. */
  workerSilent(task: TaskRecord, silentForMs: number): void;
}

/** Runs the timers of the tasks this coordinator announced (foreign tasks get none). */
export class TaskTimers {
  constructor(
    private readonly clock: LifecycleClock,
    private readonly watchdogGraceFactor: number,
    private readonly handlers: TimerHandlers,
  ) {}

  /** Starts the TTL of an announced task. */
  armTtl(task: TaskRecord): void {
    this.clock.clearTimeout(task.timer);
    if (!task.owned) return;
    task.timer = this.clock.setTimeout(() => {
      if (task.state === 'announced') this.handlers.ttlExpired(task);
    }, task.ttlSeconds * 1000);
  }

  /** Waits the task's retry delay before its next attempt. */
  armRetryDelay(task: TaskRecord): void {
    this.clock.clearTimeout(task.timer);
    task.timer = this.clock.setTimeout(() => this.handlers.retryDue(task), task.retryDelaySeconds * 1000);
  }

  /** A claimed task is given up after ttl × grace factor without any sign of its worker. */
  watchdogWindowMs(task: TaskRecord): number {
    return task.ttlSeconds * this.watchdogGraceFactor * 1000;
  }

  /** Starts watching the claimant of a task. */
  armWatchdog(task: TaskRecord): void {
    this.clock.clearTimeout(task.timer);
    if (!task.owned) return;
    task.timer = this.clock.setTimeout(() => this.onWatchdog(task), this.watchdogWindowMs(task));
  }

  /** Stops whatever timer the task runs. */
  clear(task: TaskRecord): void {
    this.clock.clearTimeout(task.timer);
    delete task.timer;
  }

  private onWatchdog(task: TaskRecord): void {
    // Only a claimed task can fall silent: waiting for input (blocked) is not silence.
    if (task.state !== 'claimed') return;
    const silentFor = this.clock.now() - task.lastActivity;
    const window = this.watchdogWindowMs(task);
    if (silentFor < window) {
      // The worker spoke since the timer was set: wait for the rest of the window from its last word.
      task.timer = this.clock.setTimeout(() => this.onWatchdog(task), window - silentFor);
      return;
    }
    this.handlers.workerSilent(task, silentFor);
  }
}
