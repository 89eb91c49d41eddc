// Webhook prompt templates (AFM 7.3): the whole payload path grammar, root access, case-insensitive
// headers, and clear errors for missing fields, indexes and headers.
import { describe, expect, it } from 'vitest';
import { compileWebhookTemplate, WebhookTemplateError } from '../../src/afm/index.js';
import { httpStatusFor } from '../../src/http/wireErrors.js';

const PAYLOAD = {
  event: 'push',
  count: 3,
  ok: true,
  nothing: null,
  'field.with.dots': 'dotted',
  'special-field': ['s0', 's1'],
  "it's": 'quoted',
  repository: { full_name: 'acme/app', owner: { login: 'ada' } },
  users: [{ name: 'Ada' }, { name: 'Bob', tags: ['x', 'y'] }],
  matrix: [
    [1, 2],
    [3, 4],
  ],
  nested: { 'a.b': { c: 'deep' } },
  data: { x: 1, y: [true] },
};
const HEADERS = {
  'user-agent': 'GitHub-Hookshot/abc',
  'x-github-event': 'push',
  'content-type': 'application/json',
  'x-multi': ['one', 'two'],
};

describe('payload paths', () => {
  it.each([
    ['${http:payload.event}', 'push'],
    ['${http:payload.count}', '3'],
    ['${http:payload.ok}', 'true'],
    ['${http:payload.nothing}', 'null'],
    ['${http:payload.repository.full_name}', 'acme/app'],
    ['${http:payload.repository.owner.login}', 'ada'],
    ["${http:payload['field.with.dots']}", 'dotted'],
    ['${http:payload["field.with.dots"]}', 'dotted'],
    ["${http:payload['special-field'][0]}", 's0'],
    ["${http:payload['special-field'][1]}", 's1'],
    ["${http:payload['it\\'s']}", 'quoted'],
    ['${http:payload.users[0].name}', 'Ada'],
    ['${http:payload.users[1].tags[1]}', 'y'],
    ['${http:payload.matrix[1][0]}', '3'],
    ["${http:payload.nested['a.b'].c}", 'deep'],
    ['${http:payload.data}', '{"x":1,"y":[true]}'],
    ['${http:payload.users[1].tags}', '["x","y"]'],
    ['${http:payload.special-field[0]}', 's0'],
    ['A ${http:payload.event} of ${http:payload.count} commits', 'A push of 3 commits'],
    ['${ http:payload.event }', 'push'],
  ])('%s → %s', (template, expected) => {
    expect(compileWebhookTemplate(template)(PAYLOAD, HEADERS)).toBe(expected);
  });

  it('renders the whole payload as JSON for ${http:payload}', () => {
    const render = compileWebhookTemplate('Payload: ${http:payload}');
    expect(render({ a: 1, b: 'two' }, {})).toBe('Payload: {"a":1,"b":"two"}');
    expect(JSON.parse(render(PAYLOAD, {}).slice('Payload: '.length))).toEqual(PAYLOAD);
    expect(render('just text', {})).toBe('Payload: just text');
  });

  it('indexes a payload that is an array at the root', () => {
    const payload = [{ items: ['a'] }, { items: ['b', 'c', 'd'] }];
    expect(compileWebhookTemplate('${http:payload[1].items[2]}')(payload, {})).toBe('d');
  });

  it('leaves other text, unterminated ${ and non-http variables literal, and $${ as ${', () => {
    const render = compileWebhookTemplate(
      'cost ${env:X} $${http:payload.event} ${http:payload.event} ${unclosed',
    );
    expect(render(PAYLOAD, {})).toBe('cost ${env:X} ${http:payload.event} push ${unclosed');
  });

  it('does not reach prototype properties', () => {
    expect(() => compileWebhookTemplate('${http:payload.constructor}')({}, {})).toThrow(
      "Field 'constructor' not found in the webhook payload (${http:payload.constructor})",
    );
    expect(() => compileWebhookTemplate("${http:payload['__proto__']}")({}, {})).toThrow(
      WebhookTemplateError,
    );
  });
});

describe('headers', () => {
  it.each([
    ['${http:header.User-Agent}', 'GitHub-Hookshot/abc'],
    ['${http:header.user-agent}', 'GitHub-Hookshot/abc'],
    ['${http:header.USER-AGENT}', 'GitHub-Hookshot/abc'],
    ['${http:header.X-GitHub-Event}', 'push'],
    ['${http:header.Content-Type}', 'application/json'],
    ['${http:header.X-Multi}', 'one, two'],
  ])('%s → %s', (template, expected) => {
    expect(compileWebhookTemplate(template)(PAYLOAD, HEADERS)).toBe(expected);
  });

  it('finds headers given in any case', () => {
    expect(compileWebhookTemplate('${http:header.x-token}')({}, { 'X-Token': 'abc' })).toBe('abc');
  });
});

describe('errors when filling a template', () => {
  it.each([
    [
      '${http:payload.missing}',
      'field_not_found',
      "Field 'missing' not found in the webhook payload (${http:payload.missing})",
    ],
    [
      '${http:payload.repository.nope}',
      'field_not_found',
      "Field 'nope' not found in the webhook payload (${http:payload.repository.nope})",
    ],
    [
      '${http:payload.users[5].name}',
      'index_out_of_bounds',
      'Array index out of bounds: 5 (array has 2 elements) in ${http:payload.users[5].name}',
    ],
    [
      '${http:payload.event[0]}',
      'not_an_array',
      'Cannot access index 0 on non-array (string) in ${http:payload.event[0]}',
    ],
    [
      '${http:payload.repository[0]}',
      'not_an_array',
      'Cannot access index 0 on non-array (object) in ${http:payload.repository[0]}',
    ],
    [
      '${http:payload.users.name}',
      'not_an_object',
      "Cannot access field 'name' on non-object (array) in ${http:payload.users.name}",
    ],
    [
      '${http:payload.nothing.x}',
      'not_an_object',
      "Cannot access field 'x' on non-object (null) in ${http:payload.nothing.x}",
    ],
    [
      '${http:header.X-Missing}',
      'header_not_found',
      "Header 'X-Missing' not found in the webhook request (${http:header.X-Missing})",
    ],
  ])('%s', (template, reason, message) => {
    const render = compileWebhookTemplate(`before ${template} after`);
    let caught: unknown;
    try {
      render(PAYLOAD, HEADERS);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(WebhookTemplateError);
    const err = caught as WebhookTemplateError;
    expect(err.message).toBe(message);
    expect(err.reason).toBe(reason);
    expect(err.variable).toBe(template);
    expect(httpStatusFor(err.code)).toBe(400);
  });
});

describe('errors when compiling a template', () => {
  it.each([
    [
      '${http:payload.}',
      "invalid http variable ${http:payload.}: empty field name at position 1 (use ['…'] for unusual keys)",
    ],
    [
      '${http:payload..a}',
      "invalid http variable ${http:payload..a}: empty field name at position 1 (use ['…'] for unusual keys)",
    ],
    [
      '${http:payload[x]}',
      'invalid http variable ${http:payload[x]}: invalid array index [x]: expected a non-negative integer or a quoted key',
    ],
    [
      '${http:payload[-1]}',
      'invalid http variable ${http:payload[-1]}: invalid array index [-1]: expected a non-negative integer or a quoted key',
    ],
    [
      "${http:payload['open]}",
      "invalid http variable ${http:payload['open]}: unterminated quoted key starting at position 1",
    ],
    [
      '${http:payloadx}',
      "unknown http variable prefix 'payloadx' in ${http:payloadx}: expected http:payload or http:header",
    ],
    [
      '${http:header}',
      'invalid http variable ${http:header}: expected ${http:header.NAME} with a header name such as User-Agent',
    ],
    [
      '${http:header.}',
      'invalid http variable ${http:header.}: expected ${http:header.NAME} with a header name such as User-Agent',
    ],
    [
      '${http:header.Bad Name}',
      'invalid http variable ${http:header.Bad Name}: expected ${http:header.NAME} with a header name such as User-Agent',
    ],
    [
      '${http:body.x}',
      "unknown http variable prefix 'body' in ${http:body.x}: expected http:payload or http:header",
    ],
    ['${http:}', "unknown http variable prefix '' in ${http:}: expected http:payload or http:header"],
  ])('%s', (template, message) => {
    let caught: unknown;
    try {
      compileWebhookTemplate(template);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(WebhookTemplateError);
    expect((caught as WebhookTemplateError).message).toBe(message);
    expect((caught as WebhookTemplateError).reason).toBe('syntax');
    expect((caught as WebhookTemplateError).variable).toBe(template);
  });

  it('lists every malformed variable in one error', () => {
    expect(() => compileWebhookTemplate('${http:payload.} and ${http:nope}')).toThrow(
      /empty field name.*; unknown http variable prefix 'nope'/,
    );
  });
});
