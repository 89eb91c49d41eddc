/**
 * The one wire-error table: every AmfError code has a defined form in every protocol (so a code
 * added without a mapping fails here), every error class is an AmfError, every google.rpc
 * ErrorInfo names one domain, and a malformed percent-escape in a path is a 400 over real HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AMF_ERROR_CODES, AmfError, toAmfError } from '../../src/errors.js';
import {
  amfErrorBody,
  ERROR_INFO_DOMAIN,
  googleRpcStatusBody,
  jsonRpcErrorBody,
  WIRE_ERRORS,
  wireErrorFor,
} from '../../src/http/wireErrors.js';
import type { AmpErrorCode } from '../../src/protocols/amp/ampMessage.js';
import {
  FabricError,
  fabricErrorReply,
  type FabricErrorCode,
} from '../../src/protocols/fabric/fabricErrors.js';
import { ConfigError } from '../../src/config/config.js';
import { NatsServerMissingError } from '../../src/fabric/natsServer/supervisor.js';
import { NatsAuthError } from '../../src/fabric/connect.js';
import { WatcherError } from '../../src/watcher/watcherPool.js';
import { CardFetchError } from '../../src/admission/fetchAgentCard.js';
import { TlsPinMismatchError } from '../../src/protocols/mcp/federation/tlsPins.js';
import { HandlerError } from '../../src/worker/handlerApi.js';
import { decodePathSegment } from '../../src/http/httpKit.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

// Objects typed as a Record over the union, so these lists cannot fall behind the protocols' codes.
const AMP_CODES = Object.keys({
  trust_insufficient: true,
  intent_unclear: true,
  capability_mismatch: true,
  overloaded: true,
  expired: true,
  auth_failed: true,
  invalid_message: true,
  not_found: true,
  task_failed: true,
  internal_error: true,
} satisfies Record<AmpErrorCode, true>);
const FABRIC_CODES = Object.keys({
  AGENT_OFFLINE: true,
  AGENT_NOT_FOUND: true,
  CAPABILITY_NOT_FOUND: true,
  AUTH_DENIED: true,
  AUTH_INVALID: true,
  TIMEOUT: true,
  BAD_INPUT: true,
  UPSTREAM_ERROR: true,
  INTERNAL_ERROR: true,
  RATE_LIMITED: true,
} satisfies Record<FabricErrorCode, true>);
const GOOGLE_RPC = /^[A-Z_]+$/;

describe('the wire-error table', () => {
  it.each([...AMF_ERROR_CODES])('%s maps to every protocol', (code) => {
    const wire = wireErrorFor(code);
    expect(Number.isInteger(wire.http) && wire.http >= 400 && wire.http <= 599).toBe(true);
    // -32768..-32000 is JSON-RPC's reserved error range; AMF sends only the predefined ones.
    expect([-32600, -32603, -32000]).toContain(wire.jsonRpc);
    expect(wire.googleRpc).toMatch(GOOGLE_RPC);
    expect(AMP_CODES).toContain(wire.amp.code);
    expect(['error', 'refused']).toContain(wire.amp.status);
    expect([200, wire.http]).toContain(wire.amp.http);
    expect(FABRIC_CODES).toContain(wire.fabric);
    expect(wire.openAi).toMatch(/^[a-z_]+$/);
  });

  it('has a row for exactly the AmfError codes', () => {
    expect(Object.keys(WIRE_ERRORS).sort()).toEqual([...AMF_ERROR_CODES].sort());
  });

  it('keeps the statuses the edge always sent', () => {
    expect(wireErrorFor('INVALID_REQUEST')).toMatchObject({
      http: 400,
      jsonRpc: -32600,
      fabric: 'BAD_INPUT',
    });
    expect(wireErrorFor('PAYLOAD_TOO_LARGE')).toMatchObject({ http: 413, jsonRpc: -32600 });
    expect(wireErrorFor('RATE_LIMITED')).toMatchObject({ http: 429, googleRpc: 'RESOURCE_EXHAUSTED' });
    expect(wireErrorFor('NO_AGENT_FOR_TAG').amp).toEqual({
      code: 'capability_mismatch',
      status: 'refused',
      http: 200,
    });
    expect(wireErrorFor('UNAVAILABLE').amp).toEqual({ code: 'overloaded', status: 'error', http: 503 });
    expect(wireErrorFor('INTERNAL')).toMatchObject({ http: 500, jsonRpc: -32603, fabric: 'INTERNAL_ERROR' });
  });

  it('names one ErrorInfo domain in JSON-RPC and google.rpc bodies', () => {
    const err = new AmfError('RATE_LIMITED', 'slow down', { retry_after_seconds: 2 });
    const rpc = jsonRpcErrorBody(err, { withInfo: true }) as { error: { data: Array<{ domain: string }> } };
    const rest = googleRpcStatusBody(err, 'PARSE_ERROR') as { error: { details: Array<{ domain: string }> } };
    expect(ERROR_INFO_DOMAIN).toBe('amf.local');
    expect(rpc.error.data[0]).toMatchObject({
      domain: ERROR_INFO_DOMAIN,
      reason: 'RATE_LIMITED',
      metadata: { retry_after_seconds: '2' },
    });
    expect(rest.error.details[0]).toMatchObject({ domain: ERROR_INFO_DOMAIN, reason: 'PARSE_ERROR' });
    expect(rest.error).toMatchObject({ code: 429, status: 'RESOURCE_EXHAUSTED', message: 'slow down' });
    expect(amfErrorBody(err)).toEqual({
      error: { code: 'RATE_LIMITED', message: 'slow down', retry_after_seconds: 2 },
    });
  });
});

describe('error classes', () => {
  const cause = new Error('underneath');
  const errors: AmfError[] = [
    new ConfigError(['amf.yaml: port must be a number']),
    new NatsServerMissingError('nats-server', { cause }),
    new NatsAuthError('coordinator', 'nats://127.0.0.1:4222', { cause }),
    new WatcherError('WATCHER_BUSY', 'busy', { cause }),
    new CardFetchError('card_timeout', 'slow card', { cause }),
    new TlsPinMismatchError('agent-a', 'AA', 'BB'),
    new HandlerError('division_by_zero', 'division by zero', { cause }),
    new FabricError('AUTH_INVALID', 'bad token', undefined, { cause }),
  ];

  it.each(errors.map((e) => [e.name, e] as const))('%s is an AmfError with a mapped code', (_name, err) => {
    expect(err).toBeInstanceOf(AmfError);
    expect(AMF_ERROR_CODES).toContain(err.code);
    expect(toAmfError(err)).toBe(err);
  });

  it('keeps the wrapped error as cause', () => {
    for (const err of errors.filter(
      (e) => !(e instanceof ConfigError) && !(e instanceof TlsPinMismatchError),
    ))
      expect(err.cause, err.name).toBe(cause);
    expect(toAmfError(cause).cause).toBe(cause);
  });

  it('keeps the codes callers read', () => {
    expect(new HandlerError('division_by_zero', 'x')).toMatchObject({
      code: 'TASK_FAILED',
      reason: 'division_by_zero',
    });
    expect(fabricErrorReply(new FabricError('AUTH_INVALID', 'bad token'))).toMatchObject({
      status: 401,
      body: { error_code: 'AUTH_INVALID' },
    });
    expect(fabricErrorReply(new FabricError('AUTH_DENIED', 'no'))).toMatchObject({ status: 403 });
  });

  it('decodes a path segment, or refuses a malformed escape as INVALID_REQUEST', () => {
    expect(decodePathSegment('a%20b')).toBe('a b');
    let thrown: unknown;
    try {
      decodePathSegment('%ZZ');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(AmfError);
    expect((thrown as AmfError).code).toBe('INVALID_REQUEST');
    expect((thrown as AmfError).cause).toBeInstanceOf(URIError);
  });
});

describe('over HTTP', () => {
  let mesh: TestMesh;
  beforeAll(async () => {
    mesh = await startTestMesh({ config: { http: { maxBodyBytes: 4096 } } });
  }, 30_000);
  afterAll(() => mesh?.close());

  async function get(
    path: string,
    init: RequestInit = {},
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await mesh.fetch(path, init);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it('answers GET /tasks/%ZZ with 400 INVALID_REQUEST, not 500', async () => {
    const reply = await get('/tasks/%ZZ');
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({
      error: { code: 'INVALID_REQUEST', message: expect.stringContaining('percent-encoding') },
    });
    // A well-formed escape still reaches the lookup.
    expect((await get('/tasks/no%20such')).status).toBe(404);
  });

  it('answers GET /api/amp/jobs/%ZZ with 400 and an AMP invalid_message', async () => {
    const reply = await get('/api/amp/jobs/%ZZ');
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({
      amp: '1.0',
      status: 'error',
      error: { code: 'invalid_message', message: expect.stringContaining('percent-encoding') },
    });
  });

  it('names the one domain in A2A REST and JSON-RPC errors', async () => {
    const missing = await get('/a2a/rest/no-such-route');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({
      error: {
        code: 404,
        status: 'NOT_FOUND',
        details: [{ reason: 'NOT_FOUND', domain: ERROR_INFO_DOMAIN }],
      },
    });
    const notJson = await get('/a2a/rest/message:send', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{not json',
    });
    expect(notJson.status).toBe(400);
    expect(notJson.body).toMatchObject({
      error: { status: 'INVALID_ARGUMENT', details: [{ reason: 'PARSE_ERROR', domain: ERROR_INFO_DOMAIN }] },
    });
    const big = 'x'.repeat(5000);
    const tooLarge = await get('/a2a', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: big,
    });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body).toMatchObject({
      jsonrpc: '2.0',
      error: { code: -32600, data: [{ reason: 'PAYLOAD_TOO_LARGE', domain: ERROR_INFO_DOMAIN }] },
    });
  });
});
