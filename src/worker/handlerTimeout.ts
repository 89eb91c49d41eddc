/**
 * The bound on a handler's run. A handler that ignores its abort signal (or never settles) would
 * otherwise hold its slot for good, and a worker whose slots are all held stays live and advertised
 * while every task of its tags waits for nothing. Past its timeout an attempt ends: the handler's
 * signal is aborted and the task is answered `handler_timeout`, which the coordinator retries on
 * another worker. A handler that honours the abort frees its slot at once; one that does not is
 * stuck: it keeps its slot (the bound on concurrent handler code holds) until it settles, and a
 * worker whose slots are all stuck claims nothing and says so in its heartbeat (status `draining`).
 */
export { HANDLER_TIMEOUT_CODE } from '../events/payloads.js';

/** The default bound of a handler's run, in seconds. */
export const DEFAULT_HANDLER_TIMEOUT_SECONDS = 600;
/** How long an aborted handler has to settle before it counts as stuck. */
export const ABORT_GRACE_MS = 1_000;

/** A worker's handler timeouts: one for every tag, and some tags' own. */
export interface HandlerTimeouts {
  defaultSeconds: number;
  byTag?: Readonly<Record<string, number>>;
}

/** The timeout of a handler run for `tag`, in milliseconds (within one setTimeout). */
export function handlerTimeoutMs(timeouts: HandlerTimeouts | undefined, tag: string): number {
  const seconds = timeouts?.byTag?.[tag] ?? timeouts?.defaultSeconds ?? DEFAULT_HANDLER_TIMEOUT_SECONDS;
  return Math.min(Math.max(1, Math.round(seconds * 1000)), 2 ** 31 - 1);
}

/** How a bounded run ended: with the handler's own outcome, or at the timeout. */
export type BoundedRun<T> =
  | { kind: 'settled'; value: T }
  /** `stuck`: still running after the abort and its grace; it settles (if ever) with `running`. */
  | { kind: 'timed_out'; stuck: boolean; running: Promise<unknown> };

/**
 * The time a handler spends waiting for its requester's next message (`ctx.requestInput`) is not
 * its own: a person may answer hours later (the coordinator's `a2a.input_ttl_seconds` bounds that
 * wait). A run's bound is paused while it waits, and counts on from where it stopped.
 */
export class RunPauses {
  private waiting = 0;
  private readonly listeners = new Set<(paused: boolean) => void>();

  /** True while the handler waits for input. */
  get paused(): boolean {
    return this.waiting > 0;
  }

  /** The handler starts waiting for input; the returned function ends that wait. */
  pause(): () => void {
    let ended = false;
    this.waiting += 1;
    if (this.waiting === 1) for (const l of this.listeners) l(true);
    return () => {
      if (ended) return;
      ended = true;
      this.waiting -= 1;
      if (this.waiting === 0) for (const l of this.listeners) l(false);
    };
  }

  onChange(listener: (paused: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/**
 * Waits for `running` at most `timeoutMs` of the handler's own time (not counting what `pauses`
 * holds); past it calls `abort` and gives the handler {@link ABORT_GRACE_MS} to settle before it
 * is reported stuck. Timers are cleared either way.
 */
export async function boundRun<T>(
  running: Promise<T>,
  timeoutMs: number,
  abort: () => void,
  pauses?: RunPauses,
): Promise<BoundedRun<T>> {
  const first = await raceTimer(running, timeoutMs, pauses);
  if (first.settled) return { kind: 'settled', value: first.value };
  abort();
  const after = await raceTimer(running, ABORT_GRACE_MS);
  return { kind: 'timed_out', stuck: !after.settled, running };
}

async function raceTimer<T>(
  running: Promise<T>,
  ms: number,
  pauses?: RunPauses,
): Promise<{ settled: true; value: T } | { settled: false }> {
  let timer: NodeJS.Timeout | undefined;
  let stopListening = (): void => undefined;
  const timeout = new Promise<{ settled: false }>((resolve) => {
    let left = ms;
    let startedAt = 0;
    const arm = () => {
      startedAt = Date.now();
      timer = setTimeout(() => resolve({ settled: false }), left);
    };
    if (pauses) {
      stopListening = pauses.onChange((paused) => {
        if (paused) {
          clearTimeout(timer);
          timer = undefined;
          left = Math.max(0, left - (Date.now() - startedAt));
        } else if (timer === undefined) arm();
      });
    }
    if (!pauses?.paused) arm();
  });
  try {
    return await Promise.race([running.then((value) => ({ settled: true as const, value })), timeout]);
  } finally {
    clearTimeout(timer);
    stopListening();
  }
}
