/**
 * Fabric trace objects `{trace_id, span_id, parent_span_id}` and their W3C Trace Context form.
 * Every call gets a new span; the trace id is new unless the caller sent one (a Fabric `trace` object
 * in the body or in `arguments`, or a `traceparent` header), in which case it is reused, so one trace
 * id follows a request across agents. The trace id doubles as the mesh task's `amftraceid`, which the
 * AMF envelope requires to be a UUID: a W3C trace-id (32 hex digits) is the same 128 bits written
 * without dashes, so the two forms convert both ways.
 */
import { randomUUID } from 'node:crypto';

/** The trace object on every Fabric response. */
export interface FabricTrace {
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HEX32 = /^[0-9a-f]{32}$/;
const SPAN = /^[A-Za-z0-9-]{1,64}$/;
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A trace id as a lower-case UUID, or undefined when `value` is neither a UUID nor 32 hex digits. */
export function normalizeTraceId(value: string): string | undefined {
  const v = value.trim().toLowerCase();
  const hex = UUID.test(v) ? v.replace(/-/g, '') : HEX32.test(v) ? v : undefined;
  if (!hex || /^0+$/.test(hex)) return undefined; // all-zero is W3C's invalid trace id
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The parts of a valid `traceparent` header (version 00 layout), else undefined. */
export function parseTraceparent(
  header: string | undefined,
): { traceId: string; parentId: string; flags: string } | undefined {
  if (typeof header !== 'string' || header.length > 512) return undefined;
  const m = TRACEPARENT.exec(header.trim().toLowerCase());
  if (!m || m[1] === 'ff' || /^0+$/.test(m[3]!)) return undefined;
  const traceId = normalizeTraceId(m[2]!);
  return traceId ? { traceId, parentId: m[3]!, flags: m[4]! } : undefined;
}

/** The `traceparent` header for our span of `trace` (span uuid folded to the 16-hex parent-id). */
export function toTraceparent(trace: FabricTrace, flags = '01'): string {
  const spanHex = trace.span_id.replace(/-/g, '').slice(0, 16).padEnd(16, '0');
  return `00-${trace.trace_id.replace(/-/g, '')}-${spanHex}-${flags}`;
}

/** A fresh trace (new trace id, new span, no parent). */
export function newTrace(): FabricTrace {
  return { trace_id: randomUUID(), span_id: randomUUID(), parent_span_id: null };
}

/** Result of reading the caller's trace context. */
export type TraceContext = { ok: true; trace: FabricTrace; flags: string } | { ok: false; message: string };

/**
 * Builds the trace of this call from what the caller sent: a `trace` object (body first, then
 * `arguments.trace`) wins over a `traceparent` header. The caller's span becomes our parent.
 */
export function traceForCall(
  bodyTrace: unknown,
  argsTrace: unknown,
  traceparent: string | undefined,
): TraceContext {
  const span = randomUUID();
  const given = bodyTrace ?? argsTrace;
  if (given !== undefined && given !== null) {
    if (typeof given !== 'object' || Array.isArray(given))
      return { ok: false, message: 'trace must be an object {trace_id, span_id?, parent_span_id?}' };
    const t = given as Record<string, unknown>;
    if (t.trace_id === undefined || t.trace_id === null)
      return { ok: true, trace: { ...newTrace(), span_id: span }, flags: '01' };
    const traceId = typeof t.trace_id === 'string' ? normalizeTraceId(t.trace_id) : undefined;
    if (!traceId)
      return {
        ok: false,
        message: 'trace.trace_id must be a UUID (or 32 hex digits, as in W3C traceparent)',
      };
    const parent = t.span_id ?? t.parent_span_id ?? null;
    if (parent !== null && (typeof parent !== 'string' || !SPAN.test(parent)))
      return {
        ok: false,
        message: 'trace.span_id / trace.parent_span_id must be ids of 1-64 letters, digits or "-"',
      };
    return { ok: true, trace: { trace_id: traceId, span_id: span, parent_span_id: parent }, flags: '01' };
  }
  const w3c = parseTraceparent(traceparent);
  if (w3c)
    return {
      ok: true,
      trace: { trace_id: w3c.traceId, span_id: span, parent_span_id: w3c.parentId },
      flags: w3c.flags,
    };
  return { ok: true, trace: { trace_id: randomUUID(), span_id: span, parent_span_id: null }, flags: '01' };
}
