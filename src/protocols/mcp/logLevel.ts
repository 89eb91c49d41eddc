/**
 * MCP logging levels (RFC 5424 order, as `logging/setLevel` names them) and the per-session level
 * a server filters its `notifications/message` by. The SDK keeps its own table private, so servers
 * that relay or send log messages on a request's stream keep the level here.
 */
import type { LoggingLevel } from '@modelcontextprotocol/sdk/types.js';

/** Levels from least to most severe. */
export const LOG_LEVELS: readonly LoggingLevel[] = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
];

/** Severity rank of a level (higher is more severe); unknown levels rank as `debug`. */
export function logSeverity(level: string): number {
  return Math.max(0, LOG_LEVELS.indexOf(level as LoggingLevel));
}

/** The level one session asked for; absent until it calls `logging/setLevel`. */
export class SessionLogLevel {
  level: LoggingLevel | undefined;

  /** True when a message at `level` reaches this session (everything until a level is set). */
  admits(level: string): boolean {
    return this.level === undefined || logSeverity(level) >= logSeverity(this.level);
  }
}
