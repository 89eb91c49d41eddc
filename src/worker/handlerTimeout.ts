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
 * Waits for `running` at most `timeoutMs`; past it calls `abort` and gives the handler
 * {@link ABORT_GRACE_MS} to settle before it is reported stuck. Timers are cleared either way.
 */
export async function boundRun<T>(
  running: Promise<T>,
  timeoutMs: number,
  abort: () => void,
): Promise<BoundedRun<T>> {
  const first = await raceTimer(running, timeoutMs);
  if (first.settled) return { kind: 'settled', value: first.value };
  abort();
  const after = await raceTimer(running, ABORT_GRACE_MS);
  return { kind: 'timed_out', stuck: !after.settled, running };
}

async function raceTimer<T>(
  running: Promise<T>,
  ms: number,
): Promise<{ settled: true; value: T } | { settled: false }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ settled: false }>((resolve) => {
    timer = setTimeout(() => resolve({ settled: false }), ms);
  });
  try {
    return await Promise.race([running.then((value) => ({ settled: true as const, value })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
