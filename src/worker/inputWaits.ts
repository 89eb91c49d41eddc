/**
 * Handlers waiting for the requester's next message (`ctx.requestInput`), by task id. A follow-up
 * reaches its waiter from the coordinator (`amf.task.input`, mesh tasks) or from this worker's own
 * A2A server (direct tasks); one waiter per task, and an abort of the task ends the wait.
 */
import type { FollowUpMessage } from './handlerApi.js';
import { HandlerError } from './handlerApi.js';

interface Waiter {
  resolve: (message: FollowUpMessage) => void;
}

export class InputWaits {
  private readonly waiters = new Map<string, Waiter>();

  /** Starts waiting for `taskId`'s next message; rejects when `signal` aborts. */
  wait(taskId: string, signal: AbortSignal): Promise<FollowUpMessage> {
    if (signal.aborted) return Promise.reject(new HandlerError('cancelled', 'task cancelled'));
    if (this.waiters.has(taskId))
      return Promise.reject(new HandlerError('input_pending', `task ${taskId} is already waiting for input`));
    return new Promise<FollowUpMessage>((resolve, reject) => {
      const onAbort = () => {
        this.waiters.delete(taskId);
        reject(new HandlerError('cancelled', 'task cancelled while waiting for input'));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.set(taskId, {
        resolve: (message) => {
          signal.removeEventListener('abort', onAbort);
          this.waiters.delete(taskId);
          resolve(message);
        },
      });
    });
  }

  /** True while `taskId`'s handler waits for input. */
  isWaiting(taskId: string): boolean {
    return this.waiters.has(taskId);
  }

  /** Hands `message` to `taskId`'s waiting handler; false when nothing waits for it. */
  deliver(taskId: string, message: FollowUpMessage): boolean {
    const waiter = this.waiters.get(taskId);
    if (!waiter) return false;
    waiter.resolve(message);
    return true;
  }
}
