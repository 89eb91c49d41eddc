/**
 * The error of a DMZ watcher judgement that produced no summary (watcherPool.ts); every one of them
 * means "deny" to the admission pipeline.
 */
import { AmfError } from '../errors.js';

/** Stable codes of watcher failures; every one of them means "deny" to the admission pipeline. */
export type WatcherErrorCode =
  'WATCHER_BUSY' | 'WATCHER_TIMEOUT' | 'WATCHER_CRASHED' | 'WATCHER_CLOSED' | 'WATCHER_THREAD_MISSING';

/** A judgement that produced no summary. */
export class WatcherError extends AmfError {
  declare readonly code: WatcherErrorCode;

  constructor(code: WatcherErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, undefined, options);
    this.name = 'WatcherError';
  }
}
