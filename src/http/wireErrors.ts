/**
 * The one table that says how an AmfError goes on the wire, and the builders of the error bodies
 * every protocol adapter sends. Each protocol keeps its own shape (AMF's `{error: {code, message}}`,
 * a JSON-RPC error, a google.rpc.Status for A2A's REST binding, an AMP response, the Fabric envelope,
 * OpenAI's error object); what a code means in each of them is decided here and nowhere else.
 * Only the protocol edge (src/http, src/protocols) imports this; runtime code throws AmfErrors.
 */
import type { AmfError, AmfErrorCode } from '../errors.js';

/** AMP error codes: the AMP spec's table (section 5), then the ones AMF adds where it has no entry. */
export type AmpErrorCode =
  | 'trust_insufficient'
  | 'intent_unclear'
  | 'capability_mismatch'
  | 'overloaded'
  | 'expired'
  | 'auth_failed'
  | 'invalid_message'
  | 'not_found'
  | 'task_failed'
  | 'internal_error';

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

/** JSON-RPC 2.0 error codes AMF sends (spec §5.1; -32000..-32099 are "server error"). */
export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
export const JSONRPC_INTERNAL_ERROR = -32603;
/**
 * The generic server error. -32001..-32009 are A2A's (and MCP's) own errors, raised by their SDKs;
 * AMF's refusals use this one and name the refusal in the ErrorInfo.
 */
export const JSONRPC_SERVER_ERROR = -32000;

/**
 * The `domain` of every google.rpc.ErrorInfo AMF sends: the reasons are AMF's codes, so they belong
 * to AMF's domain (A2A's own errors, with domain a2a-protocol.org, come from the SDK).
 */
export const ERROR_INFO_DOMAIN = 'amf.local';

/** The google.rpc.Code names AMF maps to. */
export type GoogleRpcStatus =
  | 'INVALID_ARGUMENT'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'NOT_FOUND'
  | 'RESOURCE_EXHAUSTED'
  | 'DEADLINE_EXCEEDED'
  | 'UNAVAILABLE'
  | 'FAILED_PRECONDITION'
  | 'UNKNOWN'
  | 'INTERNAL';

/** The OpenAI error types the official clients branch on. */
export type OpenAiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'rate_limit_error'
  | 'timeout_error'
  | 'api_error';

/** How one AmfError code appears in each protocol. */
export interface WireError {
  /** HTTP status of AMF's own routes, JSON-RPC and REST refusals, Fabric and OpenAI. */
  readonly http: number;
  readonly jsonRpc: number;
  readonly googleRpc: GoogleRpcStatus;
  /**
   * The AMP error: its code, the response status, and the HTTP status. A mesh outcome (no agent, a
   * timeout, a failed task) is a complete AMP answer, so it goes out as 200 with the error inside.
   */
  readonly amp: { readonly code: AmpErrorCode; readonly status: 'error' | 'refused'; readonly http: number };
  readonly fabric: FabricErrorCode;
  readonly openAi: OpenAiErrorType;
}

const INVALID: Omit<WireError, 'http' | 'amp'> = {
  jsonRpc: JSONRPC_INVALID_REQUEST,
  googleRpc: 'INVALID_ARGUMENT',
  fabric: 'BAD_INPUT',
  openAi: 'invalid_request_error',
};

/** An AMF fault the caller cannot fix (HTTP 500). */
const INTERNAL: WireError = {
  http: 500,
  jsonRpc: JSONRPC_INTERNAL_ERROR,
  googleRpc: 'INTERNAL',
  amp: { code: 'internal_error', status: 'error', http: 500 },
  fabric: 'INTERNAL_ERROR',
  openAi: 'api_error',
};

/** Something AMF depends on (a remote agent, its card, its certificate) answered wrongly (502). */
const BAD_GATEWAY: WireError = {
  http: 502,
  jsonRpc: JSONRPC_SERVER_ERROR,
  googleRpc: 'UNAVAILABLE',
  amp: { code: 'internal_error', status: 'error', http: 502 },
  fabric: 'UPSTREAM_ERROR',
  openAi: 'api_error',
};

const TIMED_OUT: WireError = {
  http: 504,
  jsonRpc: JSONRPC_SERVER_ERROR,
  googleRpc: 'DEADLINE_EXCEEDED',
  amp: { code: 'expired', status: 'error', http: 200 },
  fabric: 'TIMEOUT',
  openAi: 'timeout_error',
};

const BUSY: WireError = {
  http: 503,
  jsonRpc: JSONRPC_SERVER_ERROR,
  googleRpc: 'UNAVAILABLE',
  amp: { code: 'overloaded', status: 'error', http: 503 },
  fabric: 'AGENT_OFFLINE',
  openAi: 'api_error',
};

/** The wire form of every AmfError code; a `Record`, so a new code without a row does not compile. */
export const WIRE_ERRORS: Readonly<Record<AmfErrorCode, WireError>> = {
  INVALID_REQUEST: { ...INVALID, http: 400, amp: { code: 'invalid_message', status: 'error', http: 400 } },
  PAYLOAD_TOO_LARGE: { ...INVALID, http: 413, amp: { code: 'invalid_message', status: 'error', http: 413 } },
  UNAUTHORIZED: {
    http: 401,
    jsonRpc: JSONRPC_SERVER_ERROR,
    googleRpc: 'UNAUTHENTICATED',
    amp: { code: 'auth_failed', status: 'error', http: 401 },
    fabric: 'AUTH_DENIED',
    openAi: 'authentication_error',
  },
  FORBIDDEN: {
    http: 403,
    jsonRpc: JSONRPC_SERVER_ERROR,
    googleRpc: 'PERMISSION_DENIED',
    amp: { code: 'auth_failed', status: 'refused', http: 403 },
    fabric: 'AUTH_DENIED',
    openAi: 'permission_error',
  },
  NOT_FOUND: {
    http: 404,
    jsonRpc: JSONRPC_SERVER_ERROR,
    googleRpc: 'NOT_FOUND',
    amp: { code: 'not_found', status: 'error', http: 404 },
    fabric: 'AGENT_NOT_FOUND',
    openAi: 'invalid_request_error',
  },
  NO_AGENT_FOR_TAG: {
    http: 404,
    jsonRpc: JSONRPC_SERVER_ERROR,
    googleRpc: 'NOT_FOUND',
    amp: { code: 'capability_mismatch', status: 'refused', http: 200 },
    fabric: 'CAPABILITY_NOT_FOUND',
    openAi: 'invalid_request_error',
  },
  RATE_LIMITED: {
    http: 429,
    jsonRpc: JSONRPC_SERVER_ERROR,
    googleRpc: 'RESOURCE_EXHAUSTED',
    amp: { code: 'overloaded', status: 'error', http: 429 },
    fabric: 'RATE_LIMITED',
    openAi: 'rate_limit_error',
  },
  TIMEOUT: TIMED_OUT,
  TASK_EXPIRED: TIMED_OUT,
  TASK_FAILED: {
    ...BAD_GATEWAY,
    googleRpc: 'UNKNOWN',
    amp: { code: 'task_failed', status: 'error', http: 200 },
  },
  OVERLOADED: BUSY,
  UNAVAILABLE: BUSY,
  // WebDAV's 507: the server cannot store what it needs to take the request (a full disk).
  INSUFFICIENT_STORAGE: {
    ...BUSY,
    http: 507,
    googleRpc: 'RESOURCE_EXHAUSTED',
    amp: { code: 'overloaded', status: 'error', http: 507 },
    fabric: 'INTERNAL_ERROR',
  },
  INTERNAL,
  CONFIG_INVALID: { ...INTERNAL, googleRpc: 'FAILED_PRECONDITION' },
  NATS_SERVER_MISSING: { ...INTERNAL, googleRpc: 'FAILED_PRECONDITION' },
  NATS_AUTH_FAILED: BAD_GATEWAY,
  WATCHER_BUSY: BUSY,
  WATCHER_TIMEOUT: { ...TIMED_OUT, amp: { code: 'internal_error', status: 'error', http: 504 } },
  WATCHER_CRASHED: INTERNAL,
  WATCHER_CLOSED: BUSY,
  WATCHER_THREAD_MISSING: INTERNAL,
  card_url_invalid: BAD_GATEWAY,
  card_host_mismatch: BAD_GATEWAY,
  card_redirect_refused: BAD_GATEWAY,
  card_too_large: BAD_GATEWAY,
  card_timeout: { ...TIMED_OUT, amp: { code: 'internal_error', status: 'error', http: 504 } },
  card_http_error: BAD_GATEWAY,
  card_not_json: BAD_GATEWAY,
  mcp_tls_pin_mismatch: BAD_GATEWAY,
};

/** The wire form of `code`. */
export function wireErrorFor(code: AmfErrorCode): WireError {
  return WIRE_ERRORS[code];
}

/** HTTP status for an error code. */
export function httpStatusFor(code: AmfErrorCode): number {
  return WIRE_ERRORS[code].http;
}

/** AMF's own error body, `{error: {code, message, ...details}}`. */
export function amfErrorBody(err: AmfError): { error: Record<string, unknown> } {
  return { error: { code: err.code, message: err.message, ...(err.details ?? {}) } };
}

/**
 * A google.rpc.ErrorInfo naming the error (A2A §9.5, §11.6). `reason` defaults to the AMF code; the
 * details become string metadata, as the message type requires.
 */
export function errorInfo(err: AmfError, reason: string = err.code): Record<string, unknown> {
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(err.details ?? {})) metadata[k] = String(v);
  return {
    '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
    reason,
    domain: ERROR_INFO_DOMAIN,
    metadata,
  };
}

/** Options of {@link jsonRpcErrorBody}. */
export interface JsonRpcErrorOptions {
  /** The request id when known; null otherwise (JSON-RPC §5). */
  id?: string | number | null;
  /** A code the table does not give, e.g. -32700 for a body that is not JSON. */
  code?: number;
  /** Adds the ErrorInfo as `error.data` (A2A's error details). */
  withInfo?: boolean;
}

/** A JSON-RPC 2.0 error response for `err`. */
export function jsonRpcErrorBody(err: AmfError, options: JsonRpcErrorOptions = {}): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: options.id ?? null,
    error: {
      code: options.code ?? WIRE_ERRORS[err.code].jsonRpc,
      message: err.message,
      ...(options.withInfo ? { data: [errorInfo(err)] } : {}),
    },
  };
}

/**
 * A google.rpc.Status body, as A2A's HTTP+JSON binding requires: `code` is the HTTP status.
 * `reason` overrides the ErrorInfo reason (e.g. PARSE_ERROR, which is no AMF code).
 */
export function googleRpcStatusBody(err: AmfError, reason?: string): { error: Record<string, unknown> } {
  const wire = WIRE_ERRORS[err.code];
  return {
    error: {
      code: wire.http,
      status: wire.googleRpc,
      message: err.message,
      details: [errorInfo(err, reason)],
    },
  };
}

/** OpenAI's error object, `{error: {message, type, param, code}}`. */
export function openAiErrorBody(
  err: AmfError,
  param: string | null = null,
): { error: Record<string, unknown> } {
  return {
    error: {
      message: err.message,
      type: WIRE_ERRORS[err.code].openAi,
      param: (err.details?.param as string | undefined) ?? param,
      // OpenAI's clients know "model_not_found"; the other codes are AMF's, lower-cased as OpenAI's are.
      code: err.code === 'NO_AGENT_FOR_TAG' ? 'model_not_found' : err.code.toLowerCase(),
    },
  };
}
