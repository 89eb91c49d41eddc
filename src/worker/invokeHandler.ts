/**
 * Calls a handler for one task and collects its answer: a plain result, or the chunks of an async
 * generator (each passed to `onChunk`). Handler failures become outcomes, never rejections.
 */
import {
  HandlerError,
  isAsyncIterable,
  toHandlerResult,
  type HandlerResult,
  type TaskContext,
  type WorkerHandler,
} from './handlerApi.js';

/** Outcome of running a task locally. */
export type LocalOutcome = { ok: true; result: HandlerResult } | { ok: false; code: string; message: string };

export const CANCELLED: LocalOutcome = { ok: false, code: 'cancelled', message: 'task cancelled' };

/** Runs `handler` with `ctx`; a cancelled streaming handler stops at its next chunk. */
export async function invokeHandler(
  handler: WorkerHandler,
  ctx: TaskContext,
  onChunk: (delta: string) => void,
): Promise<LocalOutcome> {
  try {
    const ret = handler.handle(ctx);
    if (!isAsyncIterable(ret)) return { ok: true, result: toHandlerResult(await ret, '') };
    let streamed = '';
    const iterator = ret[Symbol.asyncIterator]();
    for (;;) {
      const step = await iterator.next();
      if (step.done)
        return { ok: true, result: toHandlerResult(step.value as string | HandlerResult | void, streamed) };
      if (ctx.signal.aborted) return CANCELLED;
      const chunk = String(step.value);
      streamed += chunk;
      onChunk(chunk);
    }
  } catch (err) {
    if (err instanceof HandlerError) return { ok: false, code: err.reason, message: err.message };
    return { ok: false, code: 'handler_error', message: err instanceof Error ? err.message : String(err) };
  }
}
