/**
 * Runs one model call under a deadline and the caller's cancel signal, and turns whatever it throws
 * into a `ModelProviderError`. The SDKs' own `timeout` only bounds each attempt until headers arrive;
 * this bounds the whole call, retries and streamed body included.
 */
import { toProviderError, type ProviderTarget } from './providerErrors.js';

/** Calls `fn` with a signal that aborts on the caller's signal or after `timeoutMs`. */
export async function withDeadline<T>(
  timeoutMs: number,
  callerSignal: AbortSignal | undefined,
  target: ProviderTarget,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const onCallerAbort = (): void => controller.abort();
  if (callerSignal?.aborted) controller.abort();
  else callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  try {
    return await fn(controller.signal);
  } catch (err) {
    throw toProviderError(err, target, {
      callerAborted: callerSignal?.aborted === true,
      timedOut,
      timeoutMs,
    });
  } finally {
    clearTimeout(timer);
    callerSignal?.removeEventListener('abort', onCallerAbort);
  }
}
