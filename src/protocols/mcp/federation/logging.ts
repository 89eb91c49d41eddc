/**
 * Log levels across the coordinator's sessions: each session's `logging/setLevel` is kept, and
 * the agents are set to the most verbose level any open session asked for (they log to the
 * coordinator once; each session then gets what its own level admits).
 */
import type { LoggingLevel } from '@modelcontextprotocol/sdk/types.js';
import { logSeverity } from '../logLevel.js';

export class FederatedLogLevels {
  private readonly levels = new Map<object, LoggingLevel>();
  private applied: LoggingLevel | undefined;

  /** `apply` sets the agents' level (called only when the most verbose level changes). */
  constructor(private readonly apply: (level: LoggingLevel | undefined) => Promise<void>) {}

  /** A session set its level. */
  set(session: object, level: LoggingLevel): Promise<void> {
    this.levels.set(session, level);
    return this.update();
  }

  /** A session ended. */
  forget(session: object): void {
    if (this.levels.delete(session)) void this.update();
  }

  private async update(): Promise<void> {
    let most: LoggingLevel | undefined;
    for (const level of this.levels.values())
      if (most === undefined || logSeverity(level) < logSeverity(most)) most = level;
    if (most === this.applied) return;
    this.applied = most;
    await this.apply(most);
  }
}
