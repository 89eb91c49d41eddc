/**
 * AMP message validation against the spec's examples (reference/amp-SPEC.md §4.1 and the AMP README),
 * AMP parts inside A2A messages, intent routing and trust levels over a registry, and the reply_to
 * address rules. Pure functions: no mesh needed.
 */
import { describe, expect, it } from 'vitest';
import {
  AMP_EXTENSION_URI,
  makeAmpResponse,
  validateAmpMessage,
  type AmpRequest,
} from '../../src/protocols/amp/ampMessage.js';
import { extractAmpMessage } from '../../src/protocols/amp/ampA2a.js';
import { routeAmpMessage } from '../../src/protocols/amp/ampRouting.js';
import { routeIntent } from '../../src/registry/intentRouter.js';
import { isReadOnlyCapability, trustRefusal } from '../../src/protocols/amp/trustLevels.js';
import { addressRefusal, resolveCallback } from '../../src/protocols/amp/callbackDelivery.js';
import { ampOutcome } from '../../src/protocols/amp/ampService.js';
import { parseDiscoverQuery } from '../../src/protocols/amp/ampDiscover.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';

const NOW = Date.parse('2026-03-18T14:30:30Z');

/** The request example of the AMP README ("AMP Message Format"). */
const README_REQUEST = {
  amp: '1.0',
  id: 'msg_abc123',
  from: { id: 'my-agent', name: 'My Agent', type: 'assistant' },
  to: 'agentboard.fyi',
  intent: 'Find agents that can analyze workout data and suggest training adjustments',
  context: {
    background: 'User is on a polarized training plan, running 5x/week',
    constraints: 'Only suggest agents with fitness domain experience',
    tone: 'data-driven',
  },
  trust: { level: 'read-only' },
  timestamp: '2026-03-18T14:30:00Z',
};

/** The curl example of the README (the minimal message). */
const README_HELLO = {
  amp: '1.0',
  id: 'msg_hello',
  from: { id: 'your-agent' },
  to: 'agentboard.fyi',
  intent: 'Find agents that specialize in LLM memory systems',
  timestamp: '2026-03-18T00:00:00Z',
};

/** Every field of the spec's §4.1 request schema, filled in. */
const FULL_REQUEST = {
  amp: '1.0',
  id: 'msg_full',
  from: { id: 'urn:agent:planner', name: 'Planner', type: 'router' },
  to: ['calc', 'agentboard.fyi'],
  intent: 'Compute the training load for this week',
  type: 'delegate',
  context: {
    background: 'weekly plan',
    constraints: { units: 'km' },
    budget: { max_tokens: 500, max_cost_usd: 0.1 },
  },
  trust: { level: 'read-write', no_external_sends: true, allowlist: ['calc'] },
  reply_to: 'http://127.0.0.1:9/amp/replies',
  sync: false,
  ttl: 300,
  trace_id: 'trace_ab12cd34',
  timestamp: '2026-03-18T15:30:00.123+01:00',
};

function expectInvalid(value: unknown, code: string, message: RegExp): void {
  const r = validateAmpMessage(value, NOW);
  expect(r.ok).toBe(false);
  if (r.ok) return;
  expect(r.code).toBe(code);
  expect(r.message).toMatch(message);
}

describe('AMP request validation (spec §4.1, §5)', () => {
  it('accepts the README and spec example requests', () => {
    for (const example of [README_REQUEST, README_HELLO, FULL_REQUEST]) {
      const r = validateAmpMessage(example, NOW);
      expect(r.ok, JSON.stringify(r)).toBe(true);
    }
    const full = validateAmpMessage(FULL_REQUEST, NOW);
    if (!full.ok) throw new Error('unreachable');
    expect(full.message).toMatchObject({
      to: ['calc', 'agentboard.fyi'],
      type: 'delegate',
      trust: { level: 'read-write', noExternalSends: true, allowlist: ['calc'] },
      replyTo: 'http://127.0.0.1:9/amp/replies',
      sync: false,
      ttl: 300,
      traceId: 'trace_ab12cd34',
    });
    const hello = validateAmpMessage(README_HELLO, NOW);
    if (!hello.ok) throw new Error('unreachable');
    expect(hello.message.type).toBe('query'); // the spec's default type
    expect(hello.message.to).toEqual(['agentboard.fyi']);
    expect(hello.message.trust).toBeUndefined();
  });

  it('names each missing required field, in the reference order', () => {
    for (const field of ['amp', 'id', 'from', 'to', 'intent', 'timestamp']) {
      const copy: Record<string, unknown> = { ...README_HELLO };
      delete copy[field];
      expectInvalid(copy, 'invalid_message', new RegExp(`^Missing required field: ${field}$`));
    }
    expectInvalid([README_HELLO], 'invalid_message', /must be a JSON object/);
  });

  it('refuses other versions, a from without id and malformed fields', () => {
    expectInvalid({ ...README_HELLO, amp: '2.0' }, 'invalid_message', /Unsupported AMP version: "2.0"/);
    expectInvalid({ ...README_HELLO, amp: 1 }, 'invalid_message', /Unsupported AMP version/);
    expectInvalid({ ...README_HELLO, from: { name: 'x' } }, 'invalid_message', /from\.id is required/);
    expectInvalid({ ...README_HELLO, from: 'me' }, 'invalid_message', /from\.id is required/);
    expectInvalid({ ...README_HELLO, to: [] }, 'invalid_message', /"to" must be/);
    expectInvalid({ ...README_HELLO, to: [1] }, 'invalid_message', /"to" entries/);
    expectInvalid(
      { ...README_HELLO, type: 'order' },
      'invalid_message',
      /type must be one of query, delegate/,
    );
    expectInvalid(
      { ...README_HELLO, trust: { level: 'admin' } },
      'invalid_message',
      /trust\.level must be one of/,
    );
    expectInvalid({ ...README_HELLO, timestamp: 'yesterday' }, 'invalid_message', /ISO 8601/);
    expectInvalid({ ...README_HELLO, reply_to: 'ftp://x/y' }, 'invalid_message', /http\(s\)/);
    expectInvalid({ ...README_HELLO, reply_to: 'http://u:p@host/' }, 'invalid_message', /credentials/);
    expectInvalid({ ...README_HELLO, sync: 'yes' }, 'invalid_message', /sync must be a boolean/);
    expectInvalid({ ...README_HELLO, ttl: 1.5 }, 'invalid_message', /ttl must be a whole number/);
    expectInvalid({ ...README_HELLO, context: [1] }, 'invalid_message', /context must be an object/);
  });

  it('bounds sizes: intent, ids, context', () => {
    expectInvalid({ ...README_HELLO, intent: 'x'.repeat(2001) }, 'invalid_message', /longer than 2000/);
    expectInvalid({ ...README_HELLO, id: 'i'.repeat(257) }, 'invalid_message', /at most 256/);
    expectInvalid(
      { ...README_HELLO, context: { blob: 'x'.repeat(70_000) } },
      'invalid_message',
      /larger than 65536/,
    );
    expectInvalid({ ...README_HELLO, to: Array(17).fill('a') }, 'invalid_message', /1 to 16/);
  });

  it('uses the spec codes intent_unclear and expired', () => {
    expectInvalid({ ...README_HELLO, intent: '   ' }, 'intent_unclear', /intent is empty/);
    // Sent at 14:30:00 with a 10 s ttl, received at 14:30:30.
    expectInvalid({ ...README_REQUEST, ttl: 10 }, 'expired', /expired/);
    expect(validateAmpMessage({ ...README_REQUEST, ttl: 60 }, NOW).ok).toBe(true);
  });

  it('answers with in_reply_to of the refused message when its id is readable', () => {
    const r = validateAmpMessage({ ...README_HELLO, amp: '0.9' }, NOW);
    expect(r).toMatchObject({ ok: false, inReplyTo: 'msg_hello' });
  });

  it('builds responses with the spec fields, optional ones only when given', () => {
    const r = makeAmpResponse({
      inReplyTo: 'msg_abc123',
      fromId: 'coord',
      status: 'ok',
      confidence: 0.85,
      traceId: 't1',
    });
    expect(r).toMatchObject({
      amp: '1.0',
      in_reply_to: 'msg_abc123',
      from: { id: 'coord' },
      status: 'ok',
      confidence: 0.85,
      trace_id: 't1',
    });
    expect(r.id).toMatch(/^msg_[0-9a-f]{12}$/);
    expect(Number.isNaN(Date.parse(r.timestamp))).toBe(false);
    expect('error' in r || 'uncertainty' in r || 'result' in r).toBe(false);
  });
});

describe('AMP inside A2A messages', () => {
  it('finds an AMP request in a 1.0 data part, a 0.3 data part, a JSON text part and metadata', () => {
    const forms = [
      { role: 'ROLE_USER', parts: [{ data: README_HELLO }] },
      { kind: 'message', role: 'user', parts: [{ kind: 'data', data: README_HELLO }] },
      { role: 'user', parts: [{ kind: 'text', text: JSON.stringify(README_HELLO) }] },
      { role: 'user', parts: [{ text: 'hi' }], metadata: { [AMP_EXTENSION_URI]: README_HELLO } },
    ];
    for (const m of forms) {
      const r = extractAmpMessage(m, NOW);
      expect(r?.ok, JSON.stringify(m)).toBe(true);
      if (r?.ok) expect(r.message.intent).toBe(README_HELLO.intent);
    }
  });

  it('returns undefined for plain messages and the AMP error for a broken AMP part', () => {
    expect(extractAmpMessage({ parts: [{ text: 'what is {"amp" anyway' }] })).toBeUndefined();
    expect(extractAmpMessage({ parts: [{ kind: 'text', text: 'hello' }] })).toBeUndefined();
    expect(extractAmpMessage('nope')).toBeUndefined();
    const broken = extractAmpMessage({ parts: [{ data: { amp: '1.0', id: 'm1' } }] }, NOW);
    expect(broken).toMatchObject({ ok: false, code: 'invalid_message', inReplyTo: 'm1' });
  });
});

function registryWith(
  agents: Array<{ name: string; tags: string[]; skill?: string; xamf?: Record<string, unknown> }>,
): AgentRegistry {
  const registry = new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3 });
  for (const a of agents) {
    const id = `spiffe://local/worker/${a.name}`;
    registry.admit({
      agent_id: id,
      endpoint: 'http://127.0.0.1:1',
      protocols_supported: ['A2A/1.0'],
      capability_tags: a.tags,
    });
    registry.attachCard(id, {
      name: a.name,
      skills: a.tags.map((t) => ({ id: t, name: t, description: a.skill ?? '', tags: [t] })),
      'x-amf': { agent_id: id, ...(a.xamf ?? {}) },
    });
  }
  return registry;
}

function request(fields: Partial<AmpRequest>): AmpRequest {
  return {
    amp: '1.0',
    id: 'msg_1',
    from: { id: 'tester' },
    to: ['amf-coordinator'],
    intent: 'hello',
    type: 'query',
    timestamp: new Date().toISOString(),
    ...fields,
  };
}

describe('intent routing over live tags', () => {
  const registry = registryWith([
    { name: 'echo-1', tags: ['echo'], skill: 'Echoes the text it is given' },
    { name: 'calc-1', tags: ['calc', 'math'], skill: 'Evaluates arithmetic expressions such as sqrt(2) * 3' },
    { name: 'sum-1', tags: ['summarize'], skill: 'Summarizes long documents into short summaries' },
  ]);

  it('routes by tag name, word stems and skill descriptions', () => {
    expect(routeIntent('Please echo this back to me', registry)?.tag).toBe('echo');
    expect(routeIntent('calculate 2+2 for me', registry)?.tag).toBe('calc');
    expect(routeIntent('Evaluate this arithmetic expression: 3*7', registry)?.tag).toBe('calc');
    expect(routeIntent('I need a summary of this document', registry)?.tag).toBe('summarize');
    const r = routeIntent('echo the summary', registry);
    expect(r?.tag).toBe('echo');
    expect(r?.alternatives).toContain('summarize');
    expect(routeIntent('book me a flight to Lisbon', registry)).toBeUndefined();
  });

  it('honours context.capability and a tag or agent named in "to"', () => {
    expect(routeAmpMessage(request({ context: { capability: 'math' } }), registry)).toMatchObject({
      ok: true,
      tag: 'math',
      via: 'context',
    });
    expect(routeAmpMessage(request({ context: { capability: 'nope' } }), registry)).toMatchObject({
      ok: false,
      code: 'capability_mismatch',
    });
    expect(routeAmpMessage(request({ to: ['amf/echo'] }), registry)).toMatchObject({
      ok: true,
      tag: 'echo',
      via: 'to',
    });
    expect(routeAmpMessage(request({ to: ['sum-1'] }), registry)).toMatchObject({
      ok: true,
      tag: 'summarize',
      via: 'to',
    });
    // calc-1 serves two tags: the intent chooses between them.
    expect(routeAmpMessage(request({ to: ['calc-1'], intent: 'do some math' }), registry)).toMatchObject({
      ok: true,
      tag: 'math',
    });
    expect(routeAmpMessage(request({ intent: '?? !!' }), registry)).toMatchObject({
      ok: false,
      code: 'intent_unclear',
    });
    expect(routeAmpMessage(request({ intent: 'book a flight' }), registry)).toMatchObject({
      ok: false,
      code: 'capability_mismatch',
    });
  });
});

describe('trust levels', () => {
  const registry = registryWith([
    { name: 'reader-1', tags: ['lookup'], xamf: { read_only: true } },
    { name: 'mixed-1', tags: ['search', 'write'], xamf: { read_only_capabilities: ['search'] } },
    { name: 'search-2', tags: ['search'] },
    { name: 'writer-1', tags: ['write'] },
  ]);

  it('marks a tag read-only only when every agent serving it says so', () => {
    expect(isReadOnlyCapability('lookup', registry)).toBe(true);
    expect(isReadOnlyCapability('search', registry)).toBe(false); // search-2 makes no claim
    expect(isReadOnlyCapability('write', registry)).toBe(false);
    expect(isReadOnlyCapability('absent', registry)).toBe(false);
  });

  it('lets read-only senders reach only read-only capabilities, and enforces the allowlist', () => {
    const ro = { level: 'read-only' as const, noExternalSends: false };
    expect(trustRefusal(ro, 'lookup', registry)).toBeUndefined();
    expect(trustRefusal(ro, 'write', registry)).toMatch(/not read-only/);
    expect(trustRefusal({ level: 'read-write', noExternalSends: false }, 'write', registry)).toBeUndefined();
    expect(trustRefusal(undefined, 'write', registry)).toBeUndefined();
    expect(
      trustRefusal({ level: 'full', noExternalSends: false, allowlist: ['lookup'] }, 'write', registry),
    ).toMatch(/allowlist/);
  });
});

describe('confidence and uncertainty of a result', () => {
  it('is ok above 0.5, partial below or when the worker reports uncertainty', () => {
    expect(ampOutcome({ confidence: 0.9 })).toEqual({ status: 'ok', confidence: 0.9 });
    expect(ampOutcome({ confidence: 0.2 })).toMatchObject({
      status: 'partial',
      confidence: 0.2,
      uncertainty: { note: expect.stringMatching(/low confidence/) },
    });
    expect(
      ampOutcome({
        confidence: 0.8,
        data: { uncertainty: { note: 'registry is growing', suggest: 'check back' } },
      }),
    ).toEqual({
      status: 'partial',
      confidence: 0.8,
      uncertainty: { note: 'registry is growing', recommend: 'check back' },
    });
  });
});

describe('reply_to address rules', () => {
  const strict = { allowPrivate: false };
  const local = { allowPrivate: true };

  it('never calls link-local, metadata, unspecified or multicast addresses', () => {
    for (const a of [
      '169.254.169.254',
      '0.0.0.0',
      '224.0.0.251',
      '::',
      'fe80::1',
      '::ffff:169.254.169.254',
      '100.100.100.200',
    ])
      expect(addressRefusal(a, local), a).toBeDefined();
  });

  it('calls loopback and private addresses only when allowed', () => {
    for (const a of ['127.0.0.1', '10.1.2.3', '192.168.1.1', '172.20.0.1', '::1', 'fd12::1']) {
      expect(addressRefusal(a, strict), a).toMatch(/loopback or private/);
      expect(addressRefusal(a, local), a).toBeUndefined();
    }
    expect(addressRefusal('93.184.216.34', strict)).toBeUndefined();
  });

  it('refuses metadata host names and bad URLs before any connection', async () => {
    await expect(resolveCallback('http://metadata.google.internal/x', local)).rejects.toThrow(
      /metadata host/,
    );
    await expect(resolveCallback('http://169.254.169.254/latest', local)).rejects.toThrow(/link-local/);
    await expect(resolveCallback('file:///etc/passwd', local)).rejects.toThrow(/http\(s\)/);
    await expect(resolveCallback('http://127.0.0.1:9/x', strict)).rejects.toThrow(/private/);
    await expect(resolveCallback('http://127.0.0.1:9/x', local)).resolves.toMatchObject({
      address: '127.0.0.1',
      family: 4,
    });
  });
});

describe('discover query bounds', () => {
  it('accepts the hub parameters and refuses out-of-range ones', () => {
    expect(parseDiscoverQuery(new URLSearchParams('q=memory&limit=5'))).toEqual({
      ok: true,
      q: 'memory',
      capability: null,
      limit: 5,
    });
    expect(parseDiscoverQuery(new URLSearchParams(''))).toEqual({
      ok: true,
      q: null,
      capability: null,
      limit: 10,
    });
    expect(parseDiscoverQuery(new URLSearchParams('limit=51'))).toMatchObject({ ok: false });
    expect(parseDiscoverQuery(new URLSearchParams('limit=0'))).toMatchObject({ ok: false });
    expect(parseDiscoverQuery(new URLSearchParams(`q=${'x'.repeat(201)}`))).toMatchObject({ ok: false });
    expect(parseDiscoverQuery(new URLSearchParams(`capability=${'x'.repeat(101)}`))).toMatchObject({
      ok: false,
    });
  });
});
