/**
 * The local error type of AMF. Every error carries a stable code; `httpStatusFor` is the one place
 * that maps codes to HTTP statuses (protocol adapters map the same codes to their wire errors).
 */

export type AmfErrorCode =
  | 'INVALID_REQUEST'
  | 'UNAUTHORIZED'
  | 'NOT_FOUND'
  | 'NO_AGENT_FOR_TAG'
  | 'PAYLOAD_TOO_LARGE'
  | 'RATE_LIMITED'
  | 'TIMEOUT'
  | 'TASK_FAILED'
  | 'TASK_EXPIRED'
  | 'OVERLOADED'
  | 'UNAVAILABLE'
  | 'INTERNAL';

const HTTP_STATUS: Record<AmfErrorCode, number> = {
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  NOT_FOUND: 404,
  NO_AGENT_FOR_TAG: 404,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  TIMEOUT: 504,
  TASK_FAILED: 502,
  TASK_EXPIRED: 504,
  OVERLOADED: 503,
  UNAVAILABLE: 503,
  INTERNAL: 500,
};

/** An error with a stable code and a message that says what was wrong and what was expected. */
export class AmfError extends Error {
  constructor(
    readonly code: AmfErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'AmfError';
  }
}

/** HTTP status for an error code. */
export function httpStatusFor(code: AmfErrorCode): number {
  return HTTP_STATUS[code];
}

/** Wraps anything thrown into an AmfError (unknown errors become INTERNAL). */
export function toAmfError(err: unknown): AmfError {
  if (err instanceof AmfError) return err;
  return new AmfError('INTERNAL', err instanceof Error ? err.message : String(err));
}
