/**
 * Calls a handler for one task and collects its answer: a plain result, or the chunks of an async
 * generator (each passed to `onChunk`). Handler failures become outcomes, never rejections.
 *
 * What a failure tells whom: the handler's author sees every failure in the worker's log, with the
 * task id and the stack. A client sees a `HandlerError`'s message (the author wrote it for them:
 * that is how an error is made public), but for any other throw only `handler_error` and the task
 * id to look up: a thrown message may hold a secret ("password rejected for user svc"). The full
 * message travels as the error's `detail`, which only the operator's views show (task record, events).
 */
import {
  HandlerError,
  isAsyncIterable,
  toHandlerResult,
  type HandlerResult,
  type TaskContext,
  type WorkerHandler,
} from './handlerApi.js';
import type { LogFn } from '../log.js';

/** Outcome of running a task locally; `detail` is for the operator only (see the module comment). */
export type LocalOutcome =
  { ok: true; result: HandlerResult } | { ok: false; code: string; message: string; detail?: string };

export const CANCELLED: LocalOutcome = { ok: false, code: 'cancelled', message: 'task cancelled' };

/** Runs `handler` with `ctx`; a cancelled streaming handler stops at its next chunk. */
export async function invokeHandler(
  handler: WorkerHandler,
  ctx: TaskContext,
  onChunk: (delta: string) => void,
  log?: LogFn,
): Promise<LocalOutcome> {
  try {
    const ret = handler.handle(ctx);
    let result: HandlerResult;
    if (!isAsyncIterable(ret)) result = toHandlerResult(await ret, '');
    else {
      let streamed = '';
      const iterator = ret[Symbol.asyncIterator]();
      for (;;) {
        const step = await iterator.next();
        if (step.done) {
          result = toHandlerResult(step.value, streamed);
          break;
        }
        if (ctx.signal.aborted) return CANCELLED;
        const chunk = String(step.value);
        streamed += chunk;
        onChunk(chunk);
      }
    }
    if (result.text === '' && result.data === undefined && !(result.artifacts?.length ?? 0))
      log?.(
        'warn',
        `handler ${handler.name} answered task ${ctx.taskId} with nothing (empty text, no data)`,
        {
          task_id: ctx.taskId,
        },
      );
    return { ok: true, result };
  } catch (err) {
    if (err instanceof HandlerError) {
      log?.('warn', `handler ${handler.name} failed task ${ctx.taskId}: ${err.reason}: ${err.message}`, {
        task_id: ctx.taskId,
        reason: err.reason,
      });
      return { ok: false, code: err.reason, message: err.message };
    }
    const detail = err instanceof Error ? err.message : String(err);
    log?.('error', `handler ${handler.name} threw on task ${ctx.taskId}: ${detail}`, {
      task_id: ctx.taskId,
      stack: err instanceof Error ? err.stack : undefined,
    });
    return {
      ok: false,
      code: 'handler_error',
      message: `handler_error: the handler failed on task ${ctx.taskId} (the worker's log and the operator's view of the task have the details)`,
      detail,
    };
  }
}
