/**
 * Fabric trace objects and their W3C Trace Context form: which incoming traces are reused, which are
 * refused, and that the UUID and traceparent forms of a trace id convert both ways.
 */
import { describe, expect, it } from 'vitest';
import {
  normalizeTraceId,
  parseTraceparent,
  toTraceparent,
  traceForCall,
} from '../../src/protocols/fabric/fabricTrace.js';
import { fabricErrorReply, FabricError } from '../../src/protocols/fabric/fabricErrors.js';
import { AmfError } from '../../src/errors.js';

describe('trace ids', () => {
  it('accepts UUIDs and 32 hex digits as the same id, refuses anything else', () => {
    expect(normalizeTraceId('4BF92F35-77B3-4DA6-A3CE-929D0E0E4736')).toBe(
      '4bf92f35-77b3-4da6-a3ce-929d0e0e4736',
    );
    expect(normalizeTraceId('4bf92f3577b34da6a3ce929d0e0e4736')).toBe('4bf92f35-77b3-4da6-a3ce-929d0e0e4736');
    expect(normalizeTraceId('00000000000000000000000000000000')).toBeUndefined();
    expect(normalizeTraceId('trace_ab12')).toBeUndefined();
  });

  it('parses valid traceparent headers only', () => {
    expect(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toEqual({
      traceId: '4bf92f35-77b3-4da6-a3ce-929d0e0e4736',
      parentId: '00f067aa0ba902b7',
      flags: '01',
    });
    for (const bad of [
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', // version ff is invalid
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01', // zero trace id
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01', // zero parent id
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7', // no flags
      'garbage',
      undefined,
    ])
      expect(parseTraceparent(bad), String(bad)).toBeUndefined();
  });

  it('writes the traceparent of our span with the trace id the caller sent', () => {
    const ctx = traceForCall(undefined, undefined, '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00');
    if (!ctx.ok) throw new Error(ctx.message);
    expect(ctx.flags).toBe('00');
    expect(ctx.trace.parent_span_id).toBe('00f067aa0ba902b7');
    const header = toTraceparent(ctx.trace, ctx.flags);
    expect(header).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/);
    expect(parseTraceparent(header)?.traceId).toBe(ctx.trace.trace_id);
  });

  it('prefers a body trace over arguments.trace over the header, and refuses a malformed one', () => {
    const body = traceForCall(
      { trace_id: '11111111-1111-4111-8111-111111111111' },
      { trace_id: '22222222-2222-4222-8222-222222222222' },
      undefined,
    );
    expect(body.ok && body.trace.trace_id).toBe('11111111-1111-4111-8111-111111111111');
    const args = traceForCall(
      undefined,
      { trace_id: '22222222-2222-4222-8222-222222222222', parent_span_id: 'p1' },
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    );
    expect(args.ok && args.trace).toMatchObject({
      trace_id: '22222222-2222-4222-8222-222222222222',
      parent_span_id: 'p1',
    });
    expect(traceForCall('t', undefined, undefined)).toMatchObject({ ok: false });
    expect(traceForCall({ trace_id: 'x', span_id: 's' }, undefined, undefined)).toMatchObject({ ok: false });
    expect(
      traceForCall(
        { trace_id: '22222222-2222-4222-8222-222222222222', span_id: 'a b' },
        undefined,
        undefined,
      ),
    ).toMatchObject({ ok: false });
    const fresh = traceForCall({}, undefined, undefined);
    expect(fresh.ok && fresh.trace.parent_span_id).toBeNull();
  });
});

describe('Fabric error replies', () => {
  it('maps AMF codes to Fabric codes and statuses, with error as a string', () => {
    expect(fabricErrorReply(new AmfError('TIMEOUT', 'slow'))).toMatchObject({
      status: 504,
      body: { ok: false, error: 'slow', error_code: 'TIMEOUT', result: null },
    });
    expect(fabricErrorReply(new AmfError('NO_AGENT_FOR_TAG', 'none'))).toMatchObject({
      status: 404,
      body: { error_code: 'CAPABILITY_NOT_FOUND' },
    });
    expect(fabricErrorReply(new FabricError('BAD_INPUT', 'big', 413))).toMatchObject({
      status: 413,
      body: { error_code: 'BAD_INPUT' },
    });
    expect(fabricErrorReply(new Error('boom'))).toMatchObject({
      status: 500,
      body: { error_code: 'INTERNAL_ERROR' },
    });
  });
});
