/**
 * One error type for everything that can go wrong talking to a model server, carrying which
 * provider, which URL and which HTTP status, so "the agent failed" always comes with what to fix
 * (a key, a URL, a model name, a server that is down). The SDKs' own error classes stop here.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { AmfError, type AmfErrorCode } from '../errors.js';

/** A failed model call; `status` is the HTTP status when the server answered. */
export class ModelProviderError extends AmfError {
  constructor(
    code: AmfErrorCode,
    message: string,
    readonly provider: string,
    readonly url: string,
    readonly status: number | undefined,
  ) {
    super(code, message, { provider, url, ...(status !== undefined ? { status } : {}) });
    this.name = 'ModelProviderError';
  }
}

/** Where a call went, for messages. */
export interface ProviderTarget {
  readonly provider: string;
  readonly url: string;
  readonly model: string;
}

const MAX_DETAIL_CHARS = 300;

function codeForStatus(status: number): AmfErrorCode {
  if (status === 401 || status === 403) return 'UNAUTHORIZED';
  if (status === 404) return 'NOT_FOUND';
  if (status === 408 || status === 504) return 'TIMEOUT';
  if (status === 429) return 'RATE_LIMITED';
  if (status === 413) return 'PAYLOAD_TOO_LARGE';
  if (status >= 500) return 'UNAVAILABLE';
  // Any other refusal is the model server's judgement of what we sent: the agent run failed.
  return 'TASK_FAILED';
}

function hint(status: number, target: ProviderTarget): string {
  if (status === 401 || status === 403) return ' (check the API key: model.authentication or the env key)';
  if (status === 404) return ` (check model.url and that model "${target.model}" exists there)`;
  return '';
}

/** The server's own error text, cut short (it may echo our input back). */
function serverMessage(err: { message: string; error?: unknown }): string {
  const body = err.error as { error?: { message?: unknown }; message?: unknown } | undefined;
  const text =
    (typeof body?.error?.message === 'string' && body.error.message) ||
    (typeof body?.message === 'string' && body.message) ||
    err.message;
  return text.length > MAX_DETAIL_CHARS ? `${text.slice(0, MAX_DETAIL_CHARS)}…` : text;
}

/**
 * Maps whatever a provider SDK threw to a `ModelProviderError`. `aborted` tells a caller's cancel
 * apart from our own deadline, which both surface as an abort inside the SDK.
 */
export function toProviderError(
  err: unknown,
  target: ProviderTarget,
  why: { callerAborted: boolean; timedOut: boolean; timeoutMs: number },
): ModelProviderError {
  if (err instanceof ModelProviderError) return err;
  const where = `${target.provider} model "${target.model}" at ${target.url}`;
  const make = (code: AmfErrorCode, message: string, status?: number): ModelProviderError =>
    new ModelProviderError(code, message, target.provider, target.url, status);
  if (why.callerAborted) return make('TIMEOUT', `${where}: call cancelled`);
  if (why.timedOut) return make('TIMEOUT', `${where}: no complete answer within ${why.timeoutMs} ms`);
  if (err instanceof AmfError) return make(err.code, `${where}: ${err.message}`);
  const isApiError = err instanceof OpenAI.APIError || err instanceof Anthropic.APIError;
  if (isApiError && typeof err.status === 'number') {
    const status = err.status;
    return make(
      codeForStatus(status),
      `${where} answered HTTP ${status}: ${serverMessage(err)}${hint(status, target)}`,
      status,
    );
  }
  if (err instanceof OpenAI.APIConnectionTimeoutError || err instanceof Anthropic.APIConnectionTimeoutError)
    return make('TIMEOUT', `${where}: request timed out`);
  if (err instanceof OpenAI.APIConnectionError || err instanceof Anthropic.APIConnectionError) {
    const cause = (err as { cause?: { message?: string; code?: string } }).cause;
    const detail = cause?.code ?? cause?.message ?? err.message;
    return make('UNAVAILABLE', `${where} is unreachable: ${detail}`);
  }
  const message = err instanceof Error ? err.message : String(err);
  // What is left: the connection broke mid-answer ("terminated"), a body that did not parse, ...
  return make(
    'UNAVAILABLE',
    `${where}: the call failed before a complete answer (${message.slice(0, MAX_DETAIL_CHARS)})`,
  );
}
