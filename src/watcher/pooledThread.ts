/**
 * One started thread of the DMZ watcher pool (watcherPool.ts) and its state: starting, idle, judging
 * one advertisement, or retiring. It turns the worker's events into calls on the pool, which
 * decides what happens to the thread.
 */
import { Worker, type ResourceLimits } from 'node:worker_threads';
import { THREAD_READY_KIND, type WatcherThreadInput } from './threadProtocol.js';

/** What the pool hears from its threads. */
export interface ThreadEvents<J> {
  /** The thread has loaded and warmed up; it takes advertisements from now on. */
  onReady(thread: PooledThread<J>): void;
  /** Any other message (a verdict or a failure for its advertisement, or a stray message). */
  onMessage(thread: PooledThread<J>, message: unknown): void;
  /** The thread failed ('error' event); `why` says how, in words. */
  onError(thread: PooledThread<J>, why: string, err: Error): void;
  /** The thread is gone. */
  onExit(thread: PooledThread<J>, code: number): void;
}

/** Starts a watcher thread: an empty environment, no inherited flags, memory limits. */
export function startWatcherWorker(url: URL, input: WatcherThreadInput, limits: ResourceLimits): Worker {
  return new Worker(url, {
    workerData: input,
    // An empty environment: the thread gets secrets only through llmEnv, explicitly.
    env: {},
    // Not the parent's flags (vitest's loaders, inspector...): the thread is plain compiled JS.
    execArgv: [],
    resourceLimits: limits,
    stdin: false,
  });
}

/** A started thread; `J` is the pool's job type. */
export class PooledThread<J> {
  /** Advertisements it has answered. */
  judged = 0;
  /** The advertisement it is judging (one at a time), if any. */
  job: J | undefined;
  /** The time limit of `job`. */
  jobTimer: NodeJS.Timeout | undefined;
  /** Retires it when it stays idle too long (the pool's `idleRetireMs`). */
  idleTimer: NodeJS.Timeout | undefined;
  /** It has posted THREAD_READY_KIND. */
  ready = false;
  /** The pool terminated it on purpose (recycled or closed). */
  retiring = false;
  /** Settles when the thread has exited. */
  readonly exited: Promise<void>;
  private readonly startTimer: NodeJS.Timeout;
  private startTimedOut = false;

  /** `startLimitMs`: a thread not ready by then is terminated (a start that hangs). */
  constructor(
    readonly worker: Worker,
    events: ThreadEvents<J>,
    startLimitMs: number,
  ) {
    this.startTimer = setTimeout(() => {
      this.startTimedOut = true;
      void worker.terminate();
    }, startLimitMs);
    worker.on('message', (message: unknown) => {
      const kind = (message as { kind?: unknown } | null)?.kind;
      if (!this.ready && kind === THREAD_READY_KIND) {
        if (this.startTimedOut) return; // too late: it is being terminated
        this.ready = true;
        clearTimeout(this.startTimer);
        events.onReady(this);
      } else {
        events.onMessage(this, message);
      }
    });
    worker.on('error', (err: Error & { code?: string }) => {
      const why =
        err.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? 'watcher thread exceeded its memory limit and was terminated'
          : `watcher thread failed: ${err.message}`;
      events.onError(this, why, err);
    });
    this.exited = new Promise<void>((resolve) => {
      worker.once('exit', (code) => {
        clearTimeout(this.startTimer);
        clearTimeout(this.jobTimer);
        clearTimeout(this.idleTimer);
        events.onExit(this, code);
        resolve();
      });
    });
  }

  /** Terminates the thread on purpose; its exit frees its slot. */
  retire(): void {
    if (this.retiring) return;
    this.retiring = true;
    void this.worker.terminate();
  }

  /** Terminates a thread that misbehaved by itself while holding no advertisement. */
  drop(): void {
    void this.worker.terminate();
  }
}
