/**
 * The CloudEvents 1.0 HTTP protocol binding, receiving side: turns a request's headers and body into
 * an AMF event. Structured mode (`application/cloudevents+json`, or plain `application/json` whose
 * body is a whole envelope) and binary mode (`ce-*` headers, body = data) are accepted; batch mode
 * is refused. Framework-free: the HTTP edge passes `req.headers` and the body it has read (and
 * bounded in size), and gets back a validated event or every problem found.
 */
import type { AnyAmfEvent } from './cloudEvent.js';
import { validateEvent, type ValidationResult } from './validateEvent.js';

const CE_HEADER_PREFIX = 'ce-';
const ATTRIBUTE_NAME = /^[a-z0-9]{1,20}$/;
const INTEGER_TEXT = /^-?[0-9]{1,10}$/;

/**
 * AMF extensions whose CloudEvents type is Integer: a header carries them as text, so binary mode
 * converts them back to numbers before the schema sees them.
 */
const INTEGER_ATTRIBUTES: ReadonlySet<string> = new Set(['amfttl']);

/** Fatal decoding: a body that is not UTF-8 is refused instead of being silently mangled. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

interface MediaType {
  /** `type/subtype`, lowercased. */
  essence: string;
  /** The `charset` parameter, lowercased, if any. */
  charset: string | undefined;
  /** Whether any parameter other than charset is present. */
  otherParameters: boolean;
}

/**
 * Parses a CloudEvents HTTP request into a validated AMF event. Header names are matched
 * case-insensitively; binary-mode header values are percent-decoded as the HTTP binding requires.
 */
export function parseCloudEventRequest(
  headers: Record<string, string | string[] | undefined>,
  body: Buffer,
): ValidationResult<AnyAmfEvent> {
  const errors: string[] = [];
  const normalized = normalizeHeaders(headers, errors);
  const contentTypeHeader = normalized.get('content-type');
  const mediaType = contentTypeHeader === undefined ? undefined : parseMediaType(contentTypeHeader);

  if (mediaType !== undefined) {
    const format = cloudEventsFormat(mediaType);
    if (format?.batch === true) {
      return fail([
        `batch mode (${mediaType.essence}) is not supported: send one event per request, in structured or binary mode`,
      ]);
    }
    if (format !== undefined) {
      if (format.suffix === 'json') return structured(mediaType, body, errors, false);
      return fail([
        `event format "${mediaType.essence}" is not supported: use application/cloudevents+json (structured mode) or ce-* headers (binary mode)`,
      ]);
    }
  }
  if (normalized.has('ce-specversion')) return binary(normalized, contentTypeHeader, mediaType, body, errors);
  // A plain JSON POST of a whole envelope is what most hand-written clients send.
  if (mediaType?.essence === 'application/json') return structured(mediaType, body, errors, true);
  return fail([
    ...errors,
    'not a CloudEvent: expected Content-Type application/cloudevents+json (structured mode) or a ce-specversion header with the other ce-* attributes (binary mode)',
  ]);
}

/**
 * Structured mode: the body is the whole event in the JSON format. `plainJson` marks a request that
 * only guessed structured mode from `application/json`, so a missing specversion gets a hint.
 */
function structured(
  mediaType: MediaType,
  body: Buffer,
  errors: string[],
  plainJson: boolean,
): ValidationResult<AnyAmfEvent> {
  if (mediaType.charset !== undefined && mediaType.charset !== 'utf-8') {
    return fail([
      ...errors,
      `Content-Type charset "${mediaType.charset}" is not supported: JSON must be UTF-8`,
    ]);
  }
  const parsed = parseJsonBody(body, 'body');
  if (!parsed.ok) return fail([...errors, ...parsed.errors]);
  const envelope = parsed.value;
  if (Array.isArray(envelope)) {
    return fail([...errors, 'body is a JSON array: batch mode is not supported, send one event per request']);
  }
  if (typeof envelope !== 'object' || envelope === null) {
    return fail([...errors, 'body must be a JSON object (a CloudEvent in structured mode)']);
  }
  if (plainJson && !Object.hasOwn(envelope, 'specversion')) {
    errors.push(
      'application/json body without specversion: send a whole CloudEvent, or the attributes as ce-* headers (binary mode)',
    );
  }
  return withPrecedingErrors(errors, validateEvent(envelope));
}

/** Binary mode: attributes in `ce-*` headers, data in the body, datacontenttype in Content-Type. */
function binary(
  headers: ReadonlyMap<string, string>,
  contentTypeHeader: string | undefined,
  mediaType: MediaType | undefined,
  body: Buffer,
  errors: string[],
): ValidationResult<AnyAmfEvent> {
  const event: Record<string, unknown> = {};
  for (const [header, raw] of headers) {
    if (!header.startsWith(CE_HEADER_PREFIX)) continue;
    const name = header.slice(CE_HEADER_PREFIX.length);
    // Checked before the name is used as a key, so `ce-__proto__` can never reach the object.
    if (!ATTRIBUTE_NAME.test(name)) {
      errors.push(
        `header ${header}: "${name}" is not a valid CloudEvents attribute name (expected [a-z0-9]{1,20})`,
      );
      continue;
    }
    if (name === 'data') {
      errors.push(`header ${header}: in binary mode the data is the request body, not a header`);
      continue;
    }
    if (name === 'datacontenttype') {
      errors.push(`header ${header}: in binary mode datacontenttype travels as the Content-Type header`);
      continue;
    }
    const value = percentDecode(raw);
    if (value === undefined) {
      errors.push(`header ${header}: invalid percent-encoding in ${JSON.stringify(raw)}`);
      continue;
    }
    // A value that is not an integer stays text, so the schema reports it as "must be integer".
    event[name] = INTEGER_ATTRIBUTES.has(name) && INTEGER_TEXT.test(value) ? Number(value) : value;
  }

  if (mediaType === undefined) {
    errors.push('Content-Type header is missing: binary-mode AMF events carry application/json data');
  } else {
    event['datacontenttype'] = isPlainJson(mediaType) ? 'application/json' : contentTypeHeader;
  }
  if (body.length > 0) {
    if (mediaType !== undefined && isJsonMediaType(mediaType)) {
      const parsed = parseJsonBody(body, 'body (event data)');
      if (parsed.ok) event['data'] = parsed.value;
      else errors.push(...parsed.errors);
    } else if (mediaType !== undefined) {
      errors.push(`body of type "${mediaType.essence}" cannot be AMF event data: expected application/json`);
    }
  }
  return withPrecedingErrors(errors, validateEvent(event));
}

/**
 * Lowercases header names and keeps the one value of each header we read. A repeated `ce-*` or
 * Content-Type header is ambiguous, so it is an error rather than a guess.
 */
function normalizeHeaders(
  headers: Record<string, string | string[] | undefined>,
  errors: string[],
): Map<string, string> {
  const result = new Map<string, string>();
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const name = key.toLowerCase();
    const relevant = name === 'content-type' || name.startsWith(CE_HEADER_PREFIX);
    if (!relevant) continue;
    if (result.has(name) || (Array.isArray(value) && value.length !== 1)) {
      errors.push(`header ${name}: given more than once`);
      continue;
    }
    const single = Array.isArray(value) ? value[0] : value;
    if (single !== undefined) result.set(name, single);
  }
  return result;
}

/** RFC 9110 media type: `type/subtype *( ; name=value )`, names and type case-insensitive. */
function parseMediaType(header: string): MediaType {
  const [essence = '', ...parameters] = header.split(';');
  let charset: string | undefined;
  let otherParameters = false;
  for (const parameter of parameters) {
    const separator = parameter.indexOf('=');
    const name = (separator < 0 ? parameter : parameter.slice(0, separator)).trim().toLowerCase();
    if (name === '') continue;
    if (name === 'charset') {
      charset = parameter
        .slice(separator + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1')
        .toLowerCase();
    } else {
      otherParameters = true;
    }
  }
  return { essence: essence.trim().toLowerCase(), charset, otherParameters };
}

/**
 * Structured and batch modes are named by the media type `application/cloudevents[-batch]+<format>`;
 * undefined for any other media type (binary mode, or plain JSON).
 */
function cloudEventsFormat(mediaType: MediaType): { batch: boolean; suffix: string } | undefined {
  const slash = mediaType.essence.indexOf('/');
  if (mediaType.essence.slice(0, slash) !== 'application') return undefined;
  const subtype = mediaType.essence.slice(slash + 1);
  const plus = subtype.indexOf('+');
  const base = plus < 0 ? subtype : subtype.slice(0, plus);
  const suffix = plus < 0 ? '' : subtype.slice(plus + 1);
  if (base === 'cloudevents') return { batch: false, suffix };
  if (base === 'cloudevents-batch') return { batch: true, suffix };
  return undefined;
}

/** `application/json` with no parameter but charset=utf-8: the only datacontenttype AMF writes. */
function isPlainJson(mediaType: MediaType): boolean {
  return (
    mediaType.essence === 'application/json' &&
    !mediaType.otherParameters &&
    (mediaType.charset === undefined || mediaType.charset === 'utf-8')
  );
}

/** JSON media types (`application/json`, `*\/*+json`): their body can be parsed for a better error. */
function isJsonMediaType(mediaType: MediaType): boolean {
  const subtype = mediaType.essence.slice(mediaType.essence.indexOf('/') + 1);
  return subtype === 'json' || subtype.endsWith('+json');
}

function parseJsonBody(body: Buffer, what: string): ValidationResult<unknown> {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return fail([`${what} is not valid UTF-8`]);
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return fail([`${what} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`]);
  }
}

/** HTTP binding 3.1.3.2: header values are percent-encoded UTF-8; undefined when malformed. */
function percentDecode(value: string): string | undefined {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

/** Header problems come first, then the schema's; the event is refused if there are any. */
function withPrecedingErrors(
  errors: string[],
  result: ValidationResult<AnyAmfEvent>,
): ValidationResult<AnyAmfEvent> {
  if (errors.length === 0) return result;
  return fail(result.ok ? errors : [...errors, ...result.errors]);
}

function fail<T>(errors: string[]): ValidationResult<T> {
  return { ok: false, errors };
}
