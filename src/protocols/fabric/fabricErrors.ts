/**
 * Fabric errors. The seed spec makes `error` a string; the reference node adds stable codes
 * (AGENT_NOT_FOUND, BAD_INPUT, ...). AMF answers both: `error` is the message string and
 * `error_code` the code, in the `{ok:false, trace, result:null, error}` envelope, with an HTTP status
 * that matches the code (the reference node always answers 200; HTTP tooling is better served).
 */
import { AmfError, toAmfError, type AmfErrorCode } from '../../errors.js';
import { httpStatusFor, wireErrorFor } from '../../http/wireErrors.js';
import { newTrace, type FabricTrace } from './fabricTrace.js';
import type { FabricErrorCode } from '../../http/wireErrors.js';

export type { FabricErrorCode };

/** The AMF code behind each Fabric code (its HTTP status is that code's, from the wire table). */
const AMF_CODE: Record<FabricErrorCode, AmfErrorCode> = {
  AGENT_OFFLINE: 'UNAVAILABLE',
  AGENT_NOT_FOUND: 'NOT_FOUND',
  CAPABILITY_NOT_FOUND: 'NO_AGENT_FOR_TAG',
  AUTH_DENIED: 'FORBIDDEN',
  AUTH_INVALID: 'UNAUTHORIZED',
  TIMEOUT: 'TIMEOUT',
  BAD_INPUT: 'INVALID_REQUEST',
  UPSTREAM_ERROR: 'TASK_FAILED',
  INTERNAL_ERROR: 'INTERNAL',
  RATE_LIMITED: 'RATE_LIMITED',
};

/**
 * A Fabric error (thrown inside the Fabric adapter, sent by `fabricErrorReply`): an AmfError whose
 * `fabricCode` is sent as is, since several Fabric codes share one AMF code.
 */
export class FabricError extends AmfError {
  constructor(
    readonly fabricCode: FabricErrorCode,
    message: string,
    /** Overrides the code's usual HTTP status (e.g. 413 for a BAD_INPUT that was too large). */
    readonly httpStatus?: number,
    options?: ErrorOptions,
  ) {
    super(AMF_CODE[fabricCode], message, undefined, options);
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

/** Status and body for anything thrown while serving a Fabric call. */
export function fabricErrorReply(
  err: unknown,
  trace?: FabricTrace,
): { status: number; body: Record<string, unknown> } {
  const e = toAmfError(err);
  const status = (e instanceof FabricError ? e.httpStatus : undefined) ?? httpStatusFor(e.code);
  const code = e instanceof FabricError ? e.fabricCode : wireErrorFor(e.code).fabric;
  return { status, body: fabricErrorBody(code, e.message, trace) };
}
