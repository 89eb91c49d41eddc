/**
 * Fabric errors. The seed spec makes `error` a string; the reference node adds stable codes
 * (AGENT_NOT_FOUND, BAD_INPUT, ...). AMF answers both: `error` is the message string and
 * `error_code` the code, in the `{ok:false, trace, result:null, error}` envelope, with an HTTP status
 * that matches the code (the reference node always answers 200; HTTP tooling is better served).
 */
import { toAmfError, type AmfErrorCode } from '../../errors.js';
import { newTrace, type FabricTrace } from './fabricTrace.js';

/** The reference node's error codes. */
export type FabricErrorCode =
  | 'AGENT_OFFLINE'
  | 'AGENT_NOT_FOUND'
  | 'CAPABILITY_NOT_FOUND'
  | 'AUTH_DENIED'
  | 'AUTH_INVALID'
  | 'TIMEOUT'
  | 'BAD_INPUT'
  | 'UPSTREAM_ERROR'
  | 'INTERNAL_ERROR'
  | 'RATE_LIMITED';

const HTTP_STATUS: Record<FabricErrorCode, number> = {
  AGENT_OFFLINE: 503,
  AGENT_NOT_FOUND: 404,
  CAPABILITY_NOT_FOUND: 404,
  AUTH_DENIED: 403,
  AUTH_INVALID: 401,
  TIMEOUT: 504,
  BAD_INPUT: 400,
  UPSTREAM_ERROR: 502,
  INTERNAL_ERROR: 500,
  RATE_LIMITED: 429,
};

/** A Fabric error with its code (thrown inside the Fabric adapter, sent by `fabricErrorReply`). */
export class FabricError extends Error {
  constructor(
    readonly code: FabricErrorCode,
    message: string,
    /** Overrides the code's usual HTTP status (e.g. 413 for a BAD_INPUT that was too large). */
    readonly httpStatus?: number,
  ) {
    super(message);
    this.name = 'FabricError';
  }
}

/** The failure envelope. */
export function fabricErrorBody(
  code: FabricErrorCode,
  message: string,
  trace: FabricTrace = newTrace(),
): Record<string, unknown> {
  return { ok: false, trace, result: null, error: message, error_code: code };
}

/** The Fabric code and HTTP status of an AMF error from the mesh or the HTTP edge. */
export function fabricCodeFor(code: AmfErrorCode): { code: FabricErrorCode; status: number } {
  switch (code) {
    case 'INVALID_REQUEST':
      return { code: 'BAD_INPUT', status: 400 };
    case 'PAYLOAD_TOO_LARGE':
      return { code: 'BAD_INPUT', status: 413 };
    case 'UNAUTHORIZED':
      return { code: 'AUTH_DENIED', status: 401 };
    case 'RATE_LIMITED':
      return { code: 'RATE_LIMITED', status: 429 };
    case 'NOT_FOUND':
      return { code: 'AGENT_NOT_FOUND', status: 404 };
    case 'NO_AGENT_FOR_TAG':
      return { code: 'CAPABILITY_NOT_FOUND', status: 404 };
    case 'TIMEOUT':
    case 'TASK_EXPIRED':
      return { code: 'TIMEOUT', status: 504 };
    case 'TASK_FAILED':
      return { code: 'UPSTREAM_ERROR', status: 502 };
    case 'OVERLOADED':
    case 'UNAVAILABLE':
      return { code: 'AGENT_OFFLINE', status: 503 };
    default:
      return { code: 'INTERNAL_ERROR', status: 500 };
  }
}

/** Status and body for anything thrown while serving a Fabric call. */
export function fabricErrorReply(
  err: unknown,
  trace?: FabricTrace,
): { status: number; body: Record<string, unknown> } {
  if (err instanceof FabricError)
    return {
      status: err.httpStatus ?? HTTP_STATUS[err.code],
      body: fabricErrorBody(err.code, err.message, trace),
    };
  const e = toAmfError(err);
  const { code, status } = fabricCodeFor(e.code);
  return { status, body: fabricErrorBody(code, e.message, trace) };
}
