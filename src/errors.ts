/**
 * The local error type of AMF. Every error class in AMF extends `AmfError` and carries a stable
 * string code; errors that wrap another one pass it as the ES2022 `cause`. How a code goes on the
 * wire (HTTP status, JSON-RPC code, google.rpc status, AMP, Fabric and OpenAI errors) is decided in
 * one table, `src/http/wireErrors.ts`, which only the protocol edge imports.
 */

/**
 * Every code an AmfError may carry. The first group is the general vocabulary the mesh and the HTTP
 * edge use; the later groups are the codes of components' own error classes, spelled as they always
 * were because they appear in logs, notices and denial reasons. A code added here without a row in
 * the wire table does not compile (the table is a `Record` over this list).
 */
export const AMF_ERROR_CODES = [
  'INVALID_REQUEST',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'NOT_FOUND',
  'NO_AGENT_FOR_TAG',
  'PAYLOAD_TOO_LARGE',
  'RATE_LIMITED',
  'TIMEOUT',
  'TASK_FAILED',
  'TASK_EXPIRED',
  'OVERLOADED',
  'UNAVAILABLE',
  /** The fabric's store (JetStream) has no room: new work is refused until space returns. */
  'INSUFFICIENT_STORAGE',
  'INTERNAL',
  // Configuration (src/config).
  'CONFIG_INVALID',
  // The NATS fabric (src/fabric).
  'NATS_SERVER_MISSING',
  'NATS_AUTH_FAILED',
  // The DMZ watcher (src/watcher).
  'WATCHER_BUSY',
  'WATCHER_TIMEOUT',
  'WATCHER_CRASHED',
  'WATCHER_CLOSED',
  'WATCHER_THREAD_MISSING',
  // Agent card fetches during admission (src/admission).
  'card_url_invalid',
  'card_host_mismatch',
  'card_redirect_refused',
  'card_too_large',
  'card_timeout',
  'card_http_error',
  'card_not_json',
  // MCP federation's TLS pins (src/protocols/mcp).
  'mcp_tls_pin_mismatch',
] as const;

export type AmfErrorCode = (typeof AMF_ERROR_CODES)[number];

/** An error with a stable code and a message that says what was wrong and what was expected. */
export class AmfError extends Error {
  readonly details?: Record<string, unknown>;

  constructor(
    readonly code: AmfErrorCode,
    message: string,
    details?: Record<string, unknown>,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'AmfError';
    if (details !== undefined) this.details = details;
  }
}

/** Wraps anything thrown into an AmfError (unknown errors become INTERNAL, the original as cause). */
export function toAmfError(err: unknown): AmfError {
  if (err instanceof AmfError) return err;
  return new AmfError('INTERNAL', err instanceof Error ? err.message : String(err), undefined, {
    cause: err,
  });
}
