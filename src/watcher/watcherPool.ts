/**
 * The DMZ watcher: every advertisement is judged in isolation, in a fresh `vm` context of its own
 * (new globals and intrinsics, the rules evaluated afresh, a `vm` timeout) inside a pooled worker
 * thread that is limited in memory (`resourceLimits`), has an empty environment and is recycled
 * after `recycleAfter` advertisements, after any failure or time-out, and when its heap passes a
 * bound. Nothing is shared between advertisements at the JavaScript level; what they share is the
 * thread's isolate and heap, for at most `recycleAfter` of them (docs/admission.md).
 *
 * Starting a thread costs far more CPU than a context (docs/performance.md), so threads are started
 * ahead of need (a few on standby) and reused; with an LLM scorer configured (network I/O, and the
 * settings carry an API key) each thread judges one advertisement only, as before.
 *
 * Thread entry: node:worker_threads cannot run TypeScript on Node 20, so the thread always runs the
 * COMPILED entry. From dist/ that is the sibling `watcherThread.js`; when this module runs from
 * src/ (vitest imports the sources) it is `dist/watcher/watcherThread.js`, which `npm run build`
 * (and scripts/test.sh, before the tests) produces. If that file is missing the constructor throws
 * WATCHER_THREAD_MISSING saying so, rather than every judgement failing later.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ResourceLimits } from 'node:worker_threads';
import type { RawAdvertisement } from '../discovery/advertisement.js';
import {
  THREAD_AD_KIND,
  THREAD_FAILURE_KIND,
  THREAD_INPUT_KIND,
  type WatcherThreadAd,
  type WatcherThreadFailure,
  type WatcherThreadInput,
} from './threadProtocol.js';
import { readLlmConfig } from './llmScorer.js';
import type { WatcherSummary } from './watcherSummary.js';
import { checkThreadReply } from './threadReply.js';
import { PooledThread, startWatcherWorker, type ThreadEvents } from './pooledThread.js';
import { loadRulesScript } from './rulesScript.js';
import { WatcherError } from './watcherError.js';
import {
  DEFAULT_IDLE_RETIRE_MS,
  DEFAULT_RECYCLE_AFTER,
  DEFAULT_RECYCLE_HEAP_BYTES,
  DEFAULT_RULES_TIMEOUT_MS,
  DEFAULT_THREAD_LIMITS,
  LLM_DEADLINE_MARGIN_MS,
  defaultThreadUrl,
  type DmzWatcherOptions,
} from './watcherOptions.js';

export { WatcherError, type WatcherErrorCode } from './watcherError.js';
export {
  DEFAULT_IDLE_RETIRE_MS,
  DEFAULT_RECYCLE_AFTER,
  DEFAULT_RECYCLE_HEAP_BYTES,
  DEFAULT_RULES_TIMEOUT_MS,
  DEFAULT_THREAD_LIMITS,
  defaultThreadUrl,
  type DmzWatcherOptions,
} from './watcherOptions.js';

interface Job {
  ad: RawAdvertisement;
  /** performance.now() when judge() queued it. */
  queuedAt: number;
  resolve(summary: WatcherSummary): void;
  reject(err: WatcherError): void;
}

/** A thread not ready this long after its start is terminated: a start that hangs. */
const START_LIMIT_MS = 30_000;
type Thread = PooledThread<Job>;

/**
 * Judges advertisements, each in a fresh context inside a pooled, recycled thread. Concurrency and
 * the waiting queue are bounded so a flood of advertisements costs bounded memory and CPU; what does
 * not fit is refused at once (WATCHER_BUSY) rather than queued without end.
 */
export class DmzWatcher {
  private readonly maxConcurrent: number;
  private readonly standbyTarget: number;
  private readonly maxQueue: number;
  private readonly timeoutMs: number;
  private readonly maxWaitMs: number;
  private readonly recycleAfter: number;
  private readonly idleRetireMs: number;
  private readonly input: WatcherThreadInput;
  private readonly limits: ResourceLimits;
  private readonly threadUrl: URL;
  private readonly waiting: Job[] = [];
  /** Ready threads with no advertisement, oldest first. */
  private readonly idle: Thread[] = [];
  private readonly live = new Set<Thread>();
  private readonly events: ThreadEvents<Job>;
  private staleTimer: NodeJS.Timeout | undefined;
  private busy = 0;
  private started = 0;
  private closed = false;

  /** Throws WATCHER_THREAD_MISSING when the compiled thread entry or rules modules are missing. */
  constructor(opts: DmzWatcherOptions = {}) {
    this.maxConcurrent = Math.max(1, opts.maxConcurrent ?? 4);
    this.standbyTarget = Math.min(this.maxConcurrent, Math.max(0, opts.standby ?? 2));
    this.maxQueue = Math.max(0, opts.maxQueue ?? 256);
    this.timeoutMs = Math.max(1, opts.timeoutMs ?? 5000);
    this.maxWaitMs = Math.max(1, opts.maxWaitMs ?? this.timeoutMs);
    this.idleRetireMs = Math.max(1, opts.idleRetireMs ?? DEFAULT_IDLE_RETIRE_MS);
    const llmEnv = { ...(opts.llmEnv ?? {}) };
    // The LLM path keeps one thread per advertisement: it does network I/O with an API key in hand.
    this.recycleAfter = readLlmConfig(llmEnv) ? 1 : Math.max(1, opts.recycleAfter ?? DEFAULT_RECYCLE_AFTER);
    this.input = {
      kind: THREAD_INPUT_KIND,
      llmBudgetMs: Math.max(1, this.timeoutMs - LLM_DEADLINE_MARGIN_MS),
      llmEnv,
      rulesTimeoutMs: Math.max(1, opts.rulesTimeoutMs ?? DEFAULT_RULES_TIMEOUT_MS),
      recycleHeapBytes: Math.max(0, opts.recycleHeapBytes ?? DEFAULT_RECYCLE_HEAP_BYTES),
      rulesSource: loadRulesScript(new URL('../', defaultThreadUrl()), opts.rulesScriptPath),
    };
    this.limits = { ...(opts.resourceLimits ?? DEFAULT_THREAD_LIMITS) };
    this.threadUrl = opts.threadUrl ?? defaultThreadUrl();
    const path = fileURLToPath(this.threadUrl);
    if (!existsSync(path)) {
      throw new WatcherError(
        'WATCHER_THREAD_MISSING',
        `DMZ watcher thread entry ${path} does not exist: worker threads run compiled JavaScript, ` +
          `so build first (npm run build / npx tsc -p tsconfig.json)`,
      );
    }
    this.events = {
      onReady: (t) => {
        if (!t.retiring) this.makeIdle(t);
      },
      onMessage: (t, message) => this.onReply(t, message),
      onError: (t, why, err) => {
        // A thread that fails holding no advertisement is only dropped (see onExit).
        if (t.job) this.finish(t, { error: new WatcherError('WATCHER_CRASHED', why, { cause: err }) });
        else this.discard(t);
      },
      onExit: (t, code) => this.onExit(t, code),
    };
    this.pump(true);
  }

  /** Advertisements waiting for a thread. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Threads judging an advertisement now. */
  get running(): number {
    return this.busy;
  }

  /** Threads ready and idle, waiting for an advertisement. */
  get standby(): number {
    return this.idle.length;
  }

  /** Threads alive: starting, idle, judging or being terminated. */
  get threads(): number {
    return this.live.size;
  }

  /** Threads started since this watcher was made (recycling starts new ones). */
  get threadsStarted(): number {
    return this.started;
  }

  /**
   * Judges one advertisement in a fresh context. Rejects with a WatcherError: WATCHER_BUSY (queue
   * full, at once), WATCHER_TIMEOUT, WATCHER_CRASHED (rules failure, thread error, memory limit,
   * exit without or with an invalid answer) or WATCHER_CLOSED. Any rejection means the
   * advertisement is denied.
   */
  judge(ad: RawAdvertisement): Promise<WatcherSummary> {
    return new Promise<WatcherSummary>((resolve, reject) => {
      if (this.closed) {
        reject(new WatcherError('WATCHER_CLOSED', 'the DMZ watcher is closed'));
        return;
      }
      if (this.idle.length === 0 && this.waiting.length >= this.maxQueue) {
        reject(
          new WatcherError(
            'WATCHER_BUSY',
            `DMZ watcher is busy: ${this.busy} threads running and ${this.waiting.length} advertisements queued (limit ${this.maxQueue})`,
          ),
        );
        return;
      }
      this.waiting.push({ ad, resolve, reject, queuedAt: performance.now() });
      this.pump(false);
    });
  }

  /** Refuses new work, rejects queued work and terminates all threads (WATCHER_CLOSED). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.staleTimer);
    for (const job of this.waiting.splice(0)) {
      job.reject(
        new WatcherError('WATCHER_CLOSED', 'the DMZ watcher closed before this advertisement was judged'),
      );
    }
    const threads = [...this.live];
    for (const t of threads) t.retire();
    await Promise.allSettled(threads.map((t) => t.exited));
  }

  /** Live threads still starting (not ready, not retiring). */
  private get starting(): number {
    return [...this.live].filter((t) => !t.ready && !t.retiring).length;
  }

  /**
   * Hands waiting advertisements to idle threads, then starts threads within `maxConcurrent`: as
   * many as advertisements wait beyond the threads already starting (an advertisement is not bound
   * to a starting thread: whichever thread is ready first takes it) and, when `refill`, enough to
   * bring the standby up to its target.
   */
  private pump(refill: boolean): void {
    if (this.closed) return;
    this.dropStale();
    while (this.waiting.length > 0 && this.idle.length > 0)
      this.assign(this.idle.shift()!, this.waiting.shift()!);
    let starting = this.starting;
    while (
      this.live.size < this.maxConcurrent &&
      (this.waiting.length > starting || (refill && this.idle.length + starting < this.standbyTarget))
    ) {
      if (!this.spawn()) break;
      starting++;
    }
    this.armStaleTimer();
  }

  /**
   * Rejects (WATCHER_TIMEOUT) queued advertisements that have waited `maxWaitMs` already: by
   * then the admission pipeline has given up on them, and judging them anyway would only delay the
   * fresh ones behind them (under overload the queue would never catch up).
   */
  private dropStale(): void {
    const now = performance.now();
    while (this.waiting.length > 0 && now - this.waiting[0]!.queuedAt >= this.maxWaitMs) {
      const job = this.waiting.shift()!;
      job.reject(
        new WatcherError(
          'WATCHER_TIMEOUT',
          `advertisement waited ${Math.round(now - job.queuedAt)} ms for a watcher thread (limit ${this.maxWaitMs} ms); not judged`,
        ),
      );
    }
  }

  /** Wakes the pump when the oldest waiting advertisement goes stale, should nothing else happen. */
  private armStaleTimer(): void {
    if (this.staleTimer !== undefined || this.waiting.length === 0) return;
    const left = this.waiting[0]!.queuedAt + this.maxWaitMs - performance.now();
    this.staleTimer = setTimeout(
      () => {
        this.staleTimer = undefined;
        this.pump(false);
      },
      Math.max(0, left) + 1,
    );
  }

  /** Starts one thread; on failure rejects the first waiting job (it would have been its thread). */
  private spawn(): Thread | undefined {
    let thread: Thread;
    try {
      thread = new PooledThread(
        startWatcherWorker(this.threadUrl, this.input, this.limits),
        this.events,
        START_LIMIT_MS,
      );
    } catch (err) {
      this.waiting.shift()?.reject(
        new WatcherError('WATCHER_CRASHED', `could not start a watcher thread: ${String(err)}`, {
          cause: err,
        }),
      );
      return undefined;
    }
    this.live.add(thread);
    this.started++;
    return thread;
  }

  private onExit(thread: Thread, code: number): void {
    // A thread that died by itself holding no advertisement is not replaced at once, so a thread
    // entry that always fails cannot spin; one that died before it was ever ready takes the oldest
    // waiting advertisement with it (it would have been its thread), so each failed start is paid
    // for by one advertisement, not retried without end.
    const diedIdle = !thread.retiring && thread.job === undefined;
    const diedStarting = !thread.retiring && !thread.ready;
    this.finish(thread, {
      error: this.closed
        ? new WatcherError('WATCHER_CLOSED', 'the DMZ watcher closed while this advertisement was judged')
        : new WatcherError('WATCHER_CRASHED', `watcher thread exited (code ${code}) without an answer`),
    });
    const i = this.idle.indexOf(thread);
    if (i >= 0) this.idle.splice(i, 1);
    this.live.delete(thread);
    if (diedStarting && !this.closed) {
      this.waiting
        .shift()
        ?.reject(
          new WatcherError('WATCHER_CRASHED', `watcher thread exited (code ${code}) before it was ready`),
        );
    }
    // The slot is free only once the thread is really gone, so `maxConcurrent` bounds live threads.
    this.pump(!diedIdle);
  }

  /**
   * Puts a ready thread among the idle ones and hands it waiting work. Idle `idleRetireMs` with more
   * threads idle than the standby target, it is retired: the pool shrinks back after a burst.
   */
  private makeIdle(thread: Thread): void {
    this.idle.push(thread);
    clearTimeout(thread.idleTimer);
    thread.idleTimer = setTimeout(() => {
      if (this.idle.length > this.standbyTarget && this.idle.includes(thread)) this.discard(thread, true);
    }, this.idleRetireMs);
    this.pump(false);
  }

  /** Takes a thread that misbehaved while holding no advertisement out of service; see onExit. */
  private discard(thread: Thread, retire = false): void {
    const i = this.idle.indexOf(thread);
    if (i >= 0) this.idle.splice(i, 1);
    if (retire) thread.retire();
    else thread.drop();
  }

  /** Gives `job` to a ready, idle `thread`, which answers with one message. */
  private assign(thread: Thread, job: Job): void {
    this.busy++;
    thread.job = job;
    clearTimeout(thread.idleTimer);
    thread.jobTimer = setTimeout(() => {
      this.finish(thread, {
        error: new WatcherError(
          'WATCHER_TIMEOUT',
          `watcher thread gave no answer within ${this.timeoutMs} ms; terminated`,
        ),
      });
    }, this.timeoutMs);
    const message: WatcherThreadAd = { kind: THREAD_AD_KIND, ad: job.ad };
    thread.worker.postMessage(message);
  }

  /** A thread's answer to its current advertisement: a checked verdict or a failure. */
  private onReply(thread: Thread, reply: unknown): void {
    const job = thread.job;
    if (!job) {
      // A message nobody asked for: the thread is not behaving. Dropped like a thread that failed idle.
      this.discard(thread);
      return;
    }
    const failure = reply as Partial<WatcherThreadFailure> | null;
    if (failure?.kind === THREAD_FAILURE_KIND && failure.raw_id === job.ad.raw_id) {
      const code = failure.reason === 'timeout' ? 'WATCHER_TIMEOUT' : 'WATCHER_CRASHED';
      const why = typeof failure.message === 'string' ? failure.message.slice(0, 200) : 'no verdict';
      this.finish(thread, { error: new WatcherError(code, `watcher thread: ${why}`) });
      return;
    }
    const checked = checkThreadReply(reply, job.ad.raw_id);
    if (typeof checked === 'string') {
      this.finish(thread, {
        error: new WatcherError('WATCHER_CRASHED', `watcher thread gave an invalid answer: ${checked}`),
      });
      return;
    }
    this.finish(thread, { summary: checked }, (reply as { retire?: unknown }).retire === true);
  }

  /**
   * Settles the thread's current advertisement (none: nothing to do). After a verdict the thread
   * goes back to idle unless it has judged `recycleAfter` advertisements or asked to retire; after
   * any failure it is recycled.
   */
  private finish(
    thread: Thread,
    outcome: { summary: WatcherSummary } | { error: WatcherError },
    retire = false,
  ): void {
    const job = thread.job;
    if (!job) return;
    thread.job = undefined;
    this.busy--;
    clearTimeout(thread.jobTimer);
    if ('summary' in outcome) job.resolve(outcome.summary);
    else job.reject(outcome.error);
    if ('error' in outcome || retire || ++thread.judged >= this.recycleAfter) {
      thread.retire();
    } else if (!thread.retiring && !this.closed) {
      this.makeIdle(thread);
    }
  }
}
