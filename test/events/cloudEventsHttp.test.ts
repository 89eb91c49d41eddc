import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CloudEvent, HTTP } from 'cloudevents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AmfEvent } from '../../src/events/cloudEvent.js';
import { parseCloudEventRequest } from '../../src/events/cloudEventsHttp.js';
import type { ValidationResult } from '../../src/events/validateEvent.js';
import { validEvent } from './fixtures.js';

// A real HTTP server on an ephemeral port: the headers reach the parser as Node delivers them
// (lowercased names, joined duplicates), not as the test wrote them.
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const result = parseCloudEventRequest(req.headers, Buffer.concat(chunks));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(result));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/publish`;
});

afterAll(async () => {
  server.closeAllConnections();
  server.close();
  await once(server, 'close');
});

/** POSTs a message to the test server and returns what parseCloudEventRequest made of it. */
async function post(
  headers: Record<string, unknown>,
  body: string | Uint8Array,
): Promise<ValidationResult<AmfEvent>> {
  // The SDK leaves integer extensions as numbers in its header map; on the wire they are text.
  const wireHeaders = Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [name, String(value)]),
  );
  const response = await fetch(url, { method: 'POST', headers: wireHeaders, body });
  return (await response.json()) as ValidationResult<AmfEvent>;
}

function sdkEvent(event: AmfEvent): CloudEvent<AmfEvent['data']> {
  return new CloudEvent<AmfEvent['data']>({ ...event });
}

function errorsOf(result: ValidationResult<AmfEvent>): string[] {
  if (result.ok) throw new Error('expected the request to be refused');
  return result.errors;
}

function omit(headers: Record<string, unknown>, ...names: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !names.includes(name)));
}

function bodyText(body: unknown): string {
  if (typeof body !== 'string') throw new Error('the SDK produced a non-string body');
  return body;
}

describe('parseCloudEventRequest with the CloudEvents SDK', () => {
  it('structured mode: HTTP.structured round-trips an AMF event', async () => {
    const event = validEvent('amf.result.final');
    const message = HTTP.structured(sdkEvent(event));
    expect(message.headers['content-type']).toMatch(/^application\/cloudevents\+json/);
    expect(await post(message.headers, bodyText(message.body))).toEqual({ ok: true, value: event });
  });

  it('binary mode: HTTP.binary round-trips an AMF event, amfttl back to a number', async () => {
    const event = { ...validEvent('amf.task.claim'), amfttl: 45 };
    const message = HTTP.binary(sdkEvent(event));
    expect(message.headers['ce-amfttl']).toBe(45);
    const result = await post(message.headers, bodyText(message.body));
    expect(result).toEqual({ ok: true, value: event });
    expect(result.ok && typeof result.value.amfttl).toBe('number');
  });

  it('binary mode: unknown extensions arrive as strings and pass', async () => {
    const event = { ...validEvent(), foo: 'bar' } as AmfEvent & { foo: string };
    const message = HTTP.binary(sdkEvent(event));
    expect(await post(message.headers, bodyText(message.body))).toEqual({ ok: true, value: event });
  });

  it('binary mode: header values are percent-decoded', async () => {
    const event = { ...validEvent(), subject: 't\u00e2che "42" 100%' };
    const message = HTTP.binary(sdkEvent(event));
    const headers = { ...message.headers, 'ce-subject': 't%C3%A2che%20%2242%22%20100%25' };
    expect(await post(headers, bodyText(message.body))).toEqual({ ok: true, value: event });
  });

  it('the SDK reads back what was accepted (both sides agree on the binding)', async () => {
    const event = validEvent();
    const message = HTTP.structured(sdkEvent(event));
    const result = await post(message.headers, bodyText(message.body));
    const back = HTTP.toEvent({ headers: message.headers, body: message.body }) as CloudEvent<unknown>;
    expect(result.ok && result.value.id).toBe(back.id);
    expect(back['amfconfidence']).toBe(event.amfconfidence);
  });

  it('plain application/json with a whole envelope is structured mode', async () => {
    const event = validEvent();
    expect(await post({ 'content-type': 'application/json' }, JSON.stringify(event))).toEqual({
      ok: true,
      value: event,
    });
  });

  it('binary mode accepts Content-Type application/json; charset=utf-8', async () => {
    const event = validEvent();
    const message = HTTP.binary(sdkEvent(event));
    const headers = { ...message.headers, 'content-type': 'application/json; charset=UTF-8' };
    expect(await post(headers, bodyText(message.body))).toEqual({ ok: true, value: event });
  });
});

describe('parseCloudEventRequest refuses bad requests', () => {
  it('batch mode, with a clear reason', async () => {
    const batch = JSON.stringify([validEvent(), validEvent()]);
    const errors = errorsOf(await post({ 'content-type': 'application/cloudevents-batch+json' }, batch));
    expect(errors).toEqual([
      'batch mode (application/cloudevents-batch+json) is not supported: send one event per request, in structured or binary mode',
    ]);
  });

  it('a JSON array sent as structured mode', async () => {
    const errors = errorsOf(await post({ 'content-type': 'application/cloudevents+json' }, '[]'));
    expect(errors).toEqual(['body is a JSON array: batch mode is not supported, send one event per request']);
  });

  it('invalid JSON, with the parser message', async () => {
    const text = '{"specversion": "1.0",';
    let parserMessage = '';
    try {
      JSON.parse(text);
    } catch (error) {
      parserMessage = (error as Error).message;
    }
    const errors = errorsOf(await post({ 'content-type': 'application/cloudevents+json' }, text));
    expect(errors).toEqual([`body is not valid JSON: ${parserMessage}`]);
  });

  it('an empty structured body', async () => {
    const errors = errorsOf(await post({ 'content-type': 'application/cloudevents+json' }, ''));
    expect(errors[0]).toMatch(/^body is not valid JSON: /);
  });

  it('a body that is not UTF-8', async () => {
    const errors = errorsOf(
      await post({ 'content-type': 'application/cloudevents+json' }, new Uint8Array([0x7b, 0xff, 0x7d])),
    );
    expect(errors).toEqual(['body is not valid UTF-8']);
  });

  it('a structured body that is not an object', async () => {
    const errors = errorsOf(await post({ 'content-type': 'application/cloudevents+json' }, '"amf"'));
    expect(errors).toEqual(['body must be a JSON object (a CloudEvent in structured mode)']);
  });

  it('a structured event that breaks the schema lists every problem', async () => {
    const event = { ...validEvent(), amfconfidence: '1.5', specversion: '0.3' };
    const errors = errorsOf(
      await post({ 'content-type': 'application/cloudevents+json' }, JSON.stringify(event)),
    );
    expect(errors).toEqual([
      '/specversion: must be equal to constant "1.0"',
      '/amfconfidence: must match pattern "^(0(\\.[0-9]+)?|1(\\.0+)?)$"',
    ]);
  });

  it('another event format', async () => {
    const errors = errorsOf(await post({ 'content-type': 'application/cloudevents+avro' }, 'x'));
    expect(errors[0]).toMatch(/^event format "application\/cloudevents\+avro" is not supported/);
  });

  it('a structured charset other than UTF-8', async () => {
    const headers = { 'content-type': 'application/cloudevents+json; charset=iso-8859-1' };
    const errors = errorsOf(await post(headers, JSON.stringify(validEvent())));
    expect(errors).toEqual(['Content-Type charset "iso-8859-1" is not supported: JSON must be UTF-8']);
  });

  it('plain JSON that is not an envelope, with a hint', async () => {
    const errors = errorsOf(await post({ 'content-type': 'application/json' }, '{"text":"hi"}'));
    expect(errors[0]).toBe(
      'application/json body without specversion: send a whole CloudEvent, or the attributes as ce-* headers (binary mode)',
    );
    expect(errors).toContain("/: must have required property 'specversion'");
  });

  it('neither a CloudEvents content type nor ce-* headers', async () => {
    const errors = errorsOf(await post({ 'content-type': 'text/plain' }, 'hello'));
    expect(errors).toEqual([
      'not a CloudEvent: expected Content-Type application/cloudevents+json (structured mode) or a ce-specversion header with the other ce-* attributes (binary mode)',
    ]);
  });

  it('binary mode: amfttl that is not an integer', async () => {
    const message = HTTP.binary(sdkEvent(validEvent()));
    const errors = errorsOf(await post({ ...message.headers, 'ce-amfttl': 'sixty' }, bodyText(message.body)));
    expect(errors).toEqual(['/amfttl: must be integer']);
  });

  it('binary mode: bad attribute names, a data header and bad percent-encoding, all reported', async () => {
    const message = HTTP.binary(sdkEvent(validEvent()));
    const headers = {
      ...message.headers,
      'ce-foo_bar': 'x',
      'ce-data': '{}',
      'ce-datacontenttype': 'application/json',
      'ce-subject': '100%',
    };
    const errors = errorsOf(await post(headers, bodyText(message.body)));
    // Header order on the wire is the client's business, so compare as sets.
    expect([...errors].sort()).toEqual(
      [
        'header ce-foo_bar: "foo_bar" is not a valid CloudEvents attribute name (expected [a-z0-9]{1,20})',
        'header ce-data: in binary mode the data is the request body, not a header',
        'header ce-datacontenttype: in binary mode datacontenttype travels as the Content-Type header',
        'header ce-subject: invalid percent-encoding in "100%"',
      ].sort(),
    );
  });

  it('binary mode: a data body that is not JSON', async () => {
    const message = HTTP.binary(sdkEvent(validEvent()));
    const errors = errorsOf(await post(message.headers, '{"payload":'));
    expect(errors[0]).toMatch(/^body \(event data\) is not valid JSON: /);
  });

  it('binary mode: a non-JSON content type', async () => {
    const message = HTTP.binary(sdkEvent(validEvent()));
    const errors = errorsOf(await post({ ...message.headers, 'content-type': 'text/plain' }, 'hello'));
    expect(errors).toEqual([
      'body of type "text/plain" cannot be AMF event data: expected application/json',
      "/: must have required property 'data'",
      '/datacontenttype: must be equal to constant "application/json"',
    ]);
  });

  it('binary mode: no Content-Type', async () => {
    const headers = omit(HTTP.binary(sdkEvent(validEvent())).headers, 'content-type');
    const errors = errorsOf(await post(headers, new Uint8Array()));
    expect(errors).toContain(
      'Content-Type header is missing: binary-mode AMF events carry application/json data',
    );
    expect(errors).toContain("/: must have required property 'data'");
  });

  it('binary mode: missing required attributes are named', async () => {
    const message = HTTP.binary(sdkEvent(validEvent()));
    const headers = omit(message.headers, 'ce-source', 'ce-amfagentrole');
    const errors = errorsOf(await post(headers, bodyText(message.body)));
    expect(errors).toEqual([
      "/: must have required property 'source'",
      "/: must have required property 'amfagentrole'",
    ]);
  });
});

describe('parseCloudEventRequest called directly', () => {
  function binaryHeaders(event: AmfEvent): Record<string, string> {
    const headers = HTTP.binary(sdkEvent(event)).headers as Record<string, unknown>;
    return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, String(value)]));
  }

  it('matches header names case-insensitively', () => {
    const event = validEvent();
    const headers = Object.fromEntries(
      Object.entries(binaryHeaders(event)).map(([name, value]) => [name.toUpperCase(), value]),
    );
    const result = parseCloudEventRequest(headers, Buffer.from(JSON.stringify(event.data)));
    expect(result).toEqual({ ok: true, value: event });
  });

  it('refuses a repeated ce-* header instead of guessing', () => {
    const event = validEvent();
    const headers: Record<string, string | string[]> = {
      ...binaryHeaders(event),
      'ce-id': [event.id, event.id],
    };
    const errors = errorsOf(parseCloudEventRequest(headers, Buffer.from(JSON.stringify(event.data))));
    expect(errors).toContain('header ce-id: given more than once');
  });

  it('ignores headers that are not CloudEvents attributes', () => {
    const event = validEvent();
    const headers: IncomingHttpHeaders = {
      ...binaryHeaders(event),
      'x-request-id': 'r1',
      'set-cookie': ['a=1', 'b=2'],
      authorization: undefined,
    };
    expect(parseCloudEventRequest(headers, Buffer.from(JSON.stringify(event.data))).ok).toBe(true);
  });

  it('cannot be tricked into setting __proto__', () => {
    const event = validEvent();
    const headers = { ...binaryHeaders(event), 'ce-__proto__': 'x' };
    const errors = errorsOf(parseCloudEventRequest(headers, Buffer.from(JSON.stringify(event.data))));
    expect(errors).toEqual([
      'header ce-__proto__: "__proto__" is not a valid CloudEvents attribute name (expected [a-z0-9]{1,20})',
    ]);
  });
});
