/**
 * Structured logging (pino, JSON lines on stderr). Secrets never reach the log: the known secret
 * fields are redacted wherever they appear.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/**
 * The log callback components take instead of a pino Logger, so tests and embedders can capture or
 * silence what a component says without a logger instance.
 */
export type LogFn = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;

/** Creates the process logger at `level`. */
export function createLogger(level: string, name = 'amf'): Logger {
  return pino(
    {
      name,
      level,
      redact: {
        paths: [
          'password',
          'pass',
          'apiKey',
          'api_key',
          '*.password',
          '*.pass',
          '*.apiKey',
          '*.api_key',
          'authorization',
          '*.authorization',
        ],
        censor: '[redacted]',
      },
    },
    pino.destination({ dest: 2, sync: false }),
  );
}
