/**
 * Errors of the AFM layer. Both extend AmfError so the HTTP edge maps them with `httpStatusFor`:
 * a file that does not load is INVALID_REQUEST (the CLI prints its problems), a webhook template that
 * cannot be filled from a request is INVALID_REQUEST too (the webhook answers 400 with the message).
 */
import { AmfError } from '../errors.js';
import type { AfmProblem } from './types.js';

/** An AFM file that failed to load: every problem found, each `file:line:col: message`. */
export class AfmLoadError extends AmfError {
  constructor(readonly problems: readonly AfmProblem[]) {
    super('INVALID_REQUEST', formatLoadMessage(problems), { problems });
    this.name = 'AfmLoadError';
  }
}

function formatLoadMessage(problems: readonly AfmProblem[]): string {
  const errors = problems.filter((p) => p.severity === 'error');
  const shown = errors.length > 0 ? errors : problems;
  const head = `AFM file is invalid (${errors.length} problem${errors.length === 1 ? '' : 's'})`;
  return [head, ...shown.map((p) => `${p.file}:${p.line}:${p.column}: ${p.message}`)].join('\n');
}

/** Why a webhook template reference could not be resolved (stable, for tests and logs). */
export type WebhookTemplateErrorReason =
  | 'syntax'
  | 'field_not_found'
  | 'index_out_of_bounds'
  | 'not_an_array'
  | 'not_an_object'
  | 'header_not_found';

/** A webhook prompt template that does not compile, or a request that does not fill it. */
export class WebhookTemplateError extends AmfError {
  constructor(
    readonly reason: WebhookTemplateErrorReason,
    message: string,
    /** The variable as written, e.g. `${http:payload.items[3].name}`. */
    readonly variable?: string,
  ) {
    super('INVALID_REQUEST', message, variable === undefined ? { reason } : { reason, variable });
    this.name = 'WebhookTemplateError';
  }
}
