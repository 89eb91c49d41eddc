import { describe, expect, it } from 'vitest';
import { AMF_EVENT_TYPES } from '../../src/events/eventTypes.js';
import { validateEvent } from '../../src/events/validateEvent.js';
import { validEvent, validRecord } from './fixtures.js';

/** Applies `edit` to a fresh valid event and returns the validation errors (fails if it passed). */
function errorsAfter(edit: (event: Record<string, unknown>) => void): string[] {
  const event = validRecord();
  edit(event);
  const result = validateEvent(event);
  if (result.ok) throw new Error('expected the edited event to be invalid');
  return result.errors;
}

function dataOf(event: Record<string, unknown>): Record<string, unknown> {
  return event['data'] as Record<string, unknown>;
}

function authOf(event: Record<string, unknown>): Record<string, unknown> {
  return dataOf(event)['auth_context'] as Record<string, unknown>;
}

describe('validateEvent: valid events', () => {
  it.each(AMF_EVENT_TYPES)('accepts %s from createEvent', (type) => {
    const event = validEvent(type);
    expect(validateEvent(event)).toEqual({ ok: true, value: event });
  });

  it('returns the input itself, unchanged (no copy on the hot path)', () => {
    const event = validEvent();
    const before = structuredClone(event);
    const result = validateEvent(event);
    expect(result.ok && result.value).toBe(event);
    expect(event).toEqual(before);
  });

  it('accepts a v0.2 auth_context with a delegation chain (fails schema 1.0.0)', () => {
    const event = validRecord();
    dataOf(event)['auth_context'] = {
      identity: 'spiffe://local/specialist/b',
      trust_domain: 'local',
      scopes: ['claim:tasks', 'call:mcp'],
      granted_by: 'spiffe://local/coordinator/a',
      delegation_chain: ['spiffe://local/coordinator/a', 'spiffe://local/specialist/c'],
      issued_at: '2026-03-09T10:00:00Z',
      expires_at: '2026-03-09T10:05:00.250+01:00',
      svid_verified: true,
    };
    expect(validateEvent(event).ok).toBe(true);
  });

  it('accepts an event as the 1.0.0 reference implementation writes it', () => {
    const event = validRecord();
    event['amfschemaversion'] = '1.0.0';
    event['dataschema'] = 'https://amf.spec/schemas/event-envelope/1.0.0';
    dataOf(event)['auth_context'] = {
      identity: 'spiffe://local/w/1',
      scopes: ['classify'],
      trust_domain: 'local',
    };
    expect(validateEvent(event).ok).toBe(true);
  });

  it.each([
    ['a string', 'bar'],
    ['an integer', 42],
    ['a boolean', false],
    ['a negative 32-bit integer', -2147483648],
  ])('ignores an unknown extension attribute whose value is %s', (_label, value) => {
    const event = validRecord();
    event['foo'] = value;
    event['x9'] = 'y';
    expect(validateEvent(event).ok).toBe(true);
  });

  it.each(['0', '0.0', '0.5', '0.85', '0.999', '1', '1.0', '1.000'])('accepts amfconfidence %s', (value) => {
    const event = validRecord();
    event['amfconfidence'] = value;
    expect(validateEvent(event).ok).toBe(true);
  });

  it.each([
    '2024-02-29T00:00:00Z',
    '2026-03-09T10:00:00.123456Z',
    '2026-03-09t10:00:00z',
    '2026-03-09T10:00:00-05:30',
    '2016-12-31T23:59:60Z',
  ])('accepts time %s', (time) => {
    const event = validRecord();
    event['time'] = time;
    expect(validateEvent(event).ok).toBe(true);
  });

  it.each(['1.1.0', '1.0.0', '1.12.3', '1.2.0-rc.1', '1.1.0+build.7'])(
    'accepts amfschemaversion %s',
    (version) => {
      const event = validRecord();
      event['amfschemaversion'] = version;
      expect(validateEvent(event).ok).toBe(true);
    },
  );

  it('accepts an event without the optional attributes', () => {
    const event = validRecord();
    for (const key of ['dataschema', 'subject', 'amftraceid', 'amfparentid', 'amftaskid', 'amftrustdomain']) {
      delete event[key];
    }
    delete dataOf(event)['artifact_refs'];
    expect(validateEvent(event).ok).toBe(true);
  });
});

describe('validateEvent: CloudEvents 1.0 MUST rules, one violation at a time', () => {
  it('specversion must be "1.0"', () => {
    expect(errorsAfter((e) => (e['specversion'] = '0.3'))).toEqual([
      '/specversion: must be equal to constant "1.0"',
    ]);
  });

  it('id must be present and non-empty', () => {
    expect(errorsAfter((e) => delete e['id'])).toEqual(["/: must have required property 'id'"]);
    expect(errorsAfter((e) => (e['id'] = ''))).toContain('/id: must NOT have fewer than 1 characters');
  });

  it('source must be present and non-empty', () => {
    expect(errorsAfter((e) => delete e['source'])).toEqual(["/: must have required property 'source'"]);
    expect(errorsAfter((e) => (e['source'] = ''))).toEqual([
      '/source: must NOT have fewer than 1 characters',
    ]);
  });

  it.each([
    '2024-13-01',
    '2024-13-01T00:00:00Z',
    '2023-02-29T00:00:00Z',
    '2024-04-31T00:00:00Z',
    '2024-01-01T24:00:00Z',
    '2024-01-01T00:60:00Z',
    '2024-01-01 00:00:00Z',
    '2024-01-01T00:00:00',
    '2024-01-01T00:00:00+0100',
    '2024-01-01T00:00Z',
    '2024-12-31T12:00:60Z',
    'yesterday',
  ])('time must be RFC 3339: %s fails', (time) => {
    expect(errorsAfter((e) => (e['time'] = time))).toEqual([
      '/time: must match format "date-time" (RFC 3339, e.g. 2024-01-31T12:00:00Z)',
    ]);
  });

  it.each(['Foo-Bar', 'foo_bar', 'FOO', 'a'.repeat(21), 'caf\u00e9'])(
    'extension attribute names must match [a-z0-9]{1,20}: %s fails',
    (name) => {
      expect(errorsAfter((e) => (e[name] = 'x'))).toEqual([
        `/${name}: unknown attribute name: CloudEvents extension attribute names must match ^[a-z0-9]{1,20}$`,
      ]);
    },
  );

  it.each([
    ['an object', { nested: true }],
    ['an array', ['a']],
    ['null', null],
    ['a float', 1.5],
    ['an integer beyond 32 bits', 2147483648],
  ])('extension attribute values must be primitive: %s fails', (_label, value) => {
    expect(errorsAfter((e) => (e['foo'] = value))).toEqual([
      '/foo: extension attribute values must be a string, a boolean or a 32-bit integer (CloudEvents type system)',
    ]);
  });

  it('data and data_base64 must not both be present', () => {
    const errors = errorsAfter((e) => (e['data_base64'] = 'AAEC'));
    expect(errors).toContain(
      '/data_base64: must not appear together with "data" (CloudEvents: an event has data or data_base64, not both)',
    );
  });

  it('data_base64 alone is refused: AMF events carry JSON data', () => {
    const errors = errorsAfter((e) => {
      e['data_base64'] = 'AAEC';
      delete e['data'];
    });
    expect(errors).toEqual([
      "/: must have required property 'data'",
      '/data_base64: binary data is not supported: AMF events carry a JSON object in "data"',
    ]);
  });
});

describe('validateEvent: bad envelopes', () => {
  const table: Array<[string, (event: Record<string, unknown>) => void, string]> = [
    ['amfconfidence above 1', (e) => (e['amfconfidence'] = '1.5'), '/amfconfidence: must match pattern "'],
    ['amfconfidence 1.01', (e) => (e['amfconfidence'] = '1.01'), '/amfconfidence: must match pattern "'],
    ['amfconfidence negative', (e) => (e['amfconfidence'] = '-0.1'), '/amfconfidence: must match pattern "'],
    [
      'amfconfidence without leading digit',
      (e) => (e['amfconfidence'] = '.5'),
      '/amfconfidence: must match pattern',
    ],
    ['amfconfidence as a number', (e) => (e['amfconfidence'] = 0.5), '/amfconfidence: must be string'],
    ['amfttl negative', (e) => (e['amfttl'] = -1), '/amfttl: must be >= 0'],
    ['amfttl fractional', (e) => (e['amfttl'] = 1.5), '/amfttl: must be integer'],
    ['amfttl as a string', (e) => (e['amfttl'] = '60'), '/amfttl: must be integer'],
    [
      'amfttl beyond the CloudEvents Integer',
      (e) => (e['amfttl'] = 2 ** 31),
      '/amfttl: must be <= 2147483647',
    ],
    [
      'amfschemaversion not semver',
      (e) => (e['amfschemaversion'] = '1.1'),
      '/amfschemaversion: must be a semantic version',
    ],
    ['amfschemaversion of another major', (e) => (e['amfschemaversion'] = '2.0.0'), 'major version 1'],
    [
      'amfschemaversion with leading zero',
      (e) => (e['amfschemaversion'] = '1.01.0'),
      '/amfschemaversion: must be',
    ],
    ['unknown event type', (e) => (e['type'] = 'amf.task.abort'), '/type: must be one of "amf.discovery'],
    [
      'announce subject used as type',
      (e) => (e['type'] = 'amf.task.announce.code-exec'),
      '/type: must be one of',
    ],
    ['unknown role', (e) => (e['amfagentrole'] = 'admin'), '/amfagentrole: must be one of "coordinator"'],
    [
      'unknown visibility',
      (e) => (e['amfvisibility'] = 'team'),
      '/amfvisibility: must be one of "local", "mesh"',
    ],
    [
      'missing amfagentrole',
      (e) => delete e['amfagentrole'],
      "/: must have required property 'amfagentrole'",
    ],
    ['missing amfttl', (e) => delete e['amfttl'], "/: must have required property 'amfttl'"],
    ['missing time', (e) => delete e['time'], "/: must have required property 'time'"],
    ['id not a UUID', (e) => (e['id'] = 'evt-1'), '/id: must match format "uuid"'],
    ['amftraceid not a UUID', (e) => (e['amftraceid'] = 'trace'), '/amftraceid: must match format "uuid"'],
    ['amftaskid not a string', (e) => (e['amftaskid'] = 7), '/amftaskid: must be string'],
    [
      'datacontenttype text/plain',
      (e) => (e['datacontenttype'] = 'text/plain'),
      '/datacontenttype: must be equal to constant "application/json"',
    ],
    ['dataschema relative', (e) => (e['dataschema'] = 'schemas/x'), '/dataschema: must match format "uri"'],
    ['empty subject', (e) => (e['subject'] = ''), '/subject: must NOT have fewer than 1 characters'],
    ['data missing', (e) => delete e['data'], "/: must have required property 'data'"],
    ['data a string', (e) => (e['data'] = 'hello'), '/data: must be object'],
    ['data an array', (e) => (e['data'] = []), '/data: must be object'],
    ['payload missing', (e) => delete dataOf(e)['payload'], "/data: must have required property 'payload'"],
    ['payload an array', (e) => (dataOf(e)['payload'] = [1]), '/data/payload: must be object'],
    ['unknown data field', (e) => (dataOf(e)['extra'] = 1), '/data/extra: is not an allowed property here'],
    [
      'auth_context missing',
      (e) => delete dataOf(e)['auth_context'],
      "/data: must have required property 'auth_context'",
    ],
    [
      'identity missing',
      (e) => delete authOf(e)['identity'],
      "/data/auth_context: must have required property 'identity'",
    ],
    [
      'trust_domain missing',
      (e) => delete authOf(e)['trust_domain'],
      "/data/auth_context: must have required property 'trust_domain'",
    ],
    [
      'unknown auth field',
      (e) => (authOf(e)['role'] = 'admin'),
      '/data/auth_context/role: is not an allowed property here',
    ],
    [
      'delegation_chain not strings',
      (e) => (authOf(e)['delegation_chain'] = ['a', 2]),
      '/data/auth_context/delegation_chain/1: must be string',
    ],
    [
      'delegation_chain a string',
      (e) => (authOf(e)['delegation_chain'] = 'a,b'),
      '/data/auth_context/delegation_chain: must be array',
    ],
    [
      'svid_verified a string',
      (e) => (authOf(e)['svid_verified'] = 'yes'),
      '/data/auth_context/svid_verified: must be boolean',
    ],
    [
      'expires_at not a date-time',
      (e) => (authOf(e)['expires_at'] = 'tomorrow'),
      '/data/auth_context/expires_at: must match format "date-time"',
    ],
    [
      'artifact ref not a URI',
      (e) => (dataOf(e)['artifact_refs'] = ['not a uri']),
      '/data/artifact_refs/0: must match format "uri"',
    ],
    ['a name with a slash escapes as ~1', (e) => (e['a/b'] = 'x'), '/a~1b: unknown attribute name'],
  ];

  it('has at least 15 cases', () => expect(table.length).toBeGreaterThanOrEqual(15));

  it.each(table)('%s', (_label, edit, fragment) => {
    const errors = errorsAfter(edit);
    expect(
      errors.some((error) => error.includes(fragment)),
      `errors: ${JSON.stringify(errors)}`,
    ).toBe(true);
  });

  it.each([
    ['null', null],
    ['an array', []],
    ['a string', 'amf.task.claim'],
    ['a number', 1],
  ])('refuses %s as the whole event', (_label, input) => {
    expect(validateEvent(input)).toEqual({ ok: false, errors: ['/: must be object'] });
  });

  it('lists every problem, not just the first', () => {
    const errors = errorsAfter((e) => {
      e['specversion'] = '2.0';
      e['amfconfidence'] = '1.5';
      e['Bad'] = 1;
      delete authOf(e)['identity'];
    });
    expect(errors).toHaveLength(4);
  });

  it('reports every line in the "<JSON pointer>: <reason>" shape', () => {
    const errors = errorsAfter((e) => {
      e['time'] = 'now';
      e['amfttl'] = -5;
      dataOf(e)['evidence_refs'] = [3];
    });
    for (const error of errors) expect(error).toMatch(/^\/[^:]*: \S/);
  });
});
