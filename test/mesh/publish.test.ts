// `POST /publish`: CloudEvents from the official SDK (structured and binary mode) reach the fabric
// in the caller's name, the operator's announcements run through the lifecycle, bad events are
// refused with reasons, and the API key guards the route while the public routes stay open. What
// an anonymous caller may not publish is in publishAuthority.test.ts.
import { amfCardBlock } from '../../src/util/amfCardBlock.js';
import { randomUUID } from 'node:crypto';
import { CloudEvent, HTTP, type Message } from 'cloudevents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FinalPayload } from '../../src/events/payloads.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

interface PublishError {
  error: { code: string; message: string; reasons?: string[] };
}

/** The AMF extensions every event must carry, as the SDK takes them. */
const AMF_EXTENSIONS = {
  amfagentrole: 'specialist',
  amfvisibility: 'local',
  amfconfidence: '0.9',
  amfttl: 60,
  amfschemaversion: '1.1.0',
} as const;

const AUTH_CONTEXT = { identity: 'spiffe://local/test/publisher', trust_domain: 'local' };

/** An SDK event of `type` with every AMF extension and the AMF data shape. */
function sdkEvent(type: string, payload: Record<string, unknown>): CloudEvent<Record<string, unknown>> {
  return new CloudEvent<Record<string, unknown>>({
    type,
    source: 'urn:amf:test:publisher',
    datacontenttype: 'application/json',
    ...AMF_EXTENSIONS,
    data: { payload, auth_context: AUTH_CONTEXT },
  });
}

/** A valid structured-mode envelope as a plain object, for the tests that break one field. */
function envelope(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    specversion: '1.0',
    id: randomUUID(),
    source: 'urn:amf:test:publisher',
    type: 'amf.evidence.publish',
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    ...AMF_EXTENSIONS,
    data: { payload: { note: 'bad case' }, auth_context: AUTH_CONTEXT },
    ...overrides,
  };
}

/** The SDK's message headers as fetch headers (it may give numbers, e.g. `ce-amfttl`). */
function fetchHeaders(message: Message): Record<string, string> {
  return Object.fromEntries(Object.entries(message.headers).map(([k, v]) => [k, String(v)]));
}

/** The API key of the first mesh: its caller is the operator, who may also announce tasks. */
const OPERATOR_KEY = 'operator-key';
const AS_OPERATOR = { authorization: `Bearer ${OPERATOR_KEY}` };

/** What every accepted event says about its sender: the operator, whatever the body claimed. */
const OPERATOR_AUTH = {
  identity: 'amf:operator',
  trust_domain: 'local',
  scopes: [],
  granted_by: 'amf:operator',
  delegation_chain: [],
};

function postMessage(
  url: string,
  message: Message,
  extra: Record<string, string> = AS_OPERATOR,
): Promise<Response> {
  return fetch(`${url}/publish`, {
    method: 'POST',
    headers: { ...fetchHeaders(message), ...extra },
    body: message.body as string,
  });
}

function postRaw(url: string, body: string, contentType = 'application/cloudevents+json'): Promise<Response> {
  return fetch(`${url}/publish`, {
    method: 'POST',
    headers: { 'content-type': contentType, ...AS_OPERATOR },
    body,
  });
}

describe('POST /publish', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { coordinator: { apiKey: OPERATOR_KEY } } });
    await mesh.startWorker('echo-1', ['echo'], echoHandler);
  });
  afterAll(() => mesh?.close());

  it('accepts a structured-mode event from the cloudevents SDK and publishes it on subject = type', async () => {
    const ce = sdkEvent('amf.evidence.publish', { finding: 'structured', score: 3 });
    const message = HTTP.structured(ce);
    expect(message.headers['content-type']).toMatch(/^application\/cloudevents\+json/);
    const res = await postMessage(mesh.url, message);
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ accepted: true, id: ce.id, subject: 'amf.evidence.publish' });
    const seen = await mesh.waitForEvent((e) => e.event.id === ce.id, 10_000, 'the structured event');
    expect(seen.subject).toBe('amf.evidence.publish');
    // What the event says is kept; who sent it is the authenticated caller, not the body's claim.
    expect(seen.event).toMatchObject({
      specversion: '1.0',
      type: 'amf.evidence.publish',
      source: 'urn:amf:operator',
      ...AMF_EXTENSIONS,
      amfagentrole: 'connector',
      data: { payload: { finding: 'structured', score: 3 }, auth_context: OPERATOR_AUTH },
    });
  });

  it('accepts a binary-mode event from the cloudevents SDK (ce-* headers, data in the body)', async () => {
    const ce = sdkEvent('amf.evidence.publish', { finding: 'binary' });
    const message = HTTP.binary(ce);
    expect(message.headers['ce-type']).toBe('amf.evidence.publish');
    const res = await postMessage(mesh.url, message);
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ accepted: true, id: ce.id, subject: 'amf.evidence.publish' });
    const seen = await mesh.waitForEvent((e) => e.event.id === ce.id, 10_000, 'the binary event');
    expect(seen.subject).toBe('amf.evidence.publish');
    // ce-amfttl travelled as header text and was turned back into the Integer it is.
    expect(seen.event.amfttl).toBe(60);
    expect(seen.event.amfconfidence).toBe('0.9');
    expect(seen.event.datacontenttype).toBe('application/json');
    expect(seen.event.data).toEqual({ payload: { finding: 'binary' }, auth_context: OPERATOR_AUTH });
  });

  it("runs the operator's amf.task.announce through the lifecycle: an echo worker completes it", async () => {
    const taskId = randomUUID();
    const ce = sdkEvent('amf.task.announce', {
      task_id: taskId,
      task: 'published task text',
      required_capability: 'echo',
      reply_subject: `amf.internal.reply.${taskId}`,
    });
    const res = await postMessage(mesh.url, HTTP.structured(ce));
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({
      accepted: true,
      task_id: taskId,
      subject: 'amf.task.announce.echo',
    });
    await mesh.waitForEvent((e) => e.subject === 'amf.task.announce.echo' && e.event.amftaskid === taskId);
    const final = await mesh.waitForEvent(
      (e) => e.subject === 'amf.result.final' && e.event.amftaskid === taskId,
      10_000,
      'the final result of the published task',
    );
    const payload = final.event.data.payload as FinalPayload;
    expect(payload.status).toBe('completed');
    expect(payload.result?.text).toBe('published task text');
    await mesh.waitFor(
      () => mesh.coordinator.lifecycle.get(taskId)?.state === 'completed',
      5000,
      'task completed',
    );
  });

  it('refuses invalid events with 400 and a reason for each problem, and publishes none of them', async () => {
    const withDataBase64 = envelope({ data_base64: 'aGVsbG8=' });
    const cases: Array<{ what: string; body: string; contentType?: string; reason: RegExp }> = [
      { what: 'not JSON', body: '{"specversion": "1.0", ', reason: /not valid JSON/ },
      {
        what: 'missing specversion',
        body: JSON.stringify({ ...envelope(), specversion: undefined }),
        reason: /specversion/,
      },
      {
        what: 'specversion 0.3',
        body: JSON.stringify(envelope({ specversion: '0.3' })),
        reason: /\/specversion/,
      },
      {
        what: 'wrong type',
        body: JSON.stringify(envelope({ type: 'amf.bogus.event' })),
        reason: /\/type: must be one of/,
      },
      {
        what: 'bad time',
        body: JSON.stringify(envelope({ time: '2024-02-30T10:00:00Z' })),
        reason: /\/time:.*date-time/,
      },
      {
        what: 'confidence 1.5',
        body: JSON.stringify(envelope({ amfconfidence: '1.5' })),
        reason: /\/amfconfidence/,
      },
      {
        what: 'uppercase extension name',
        body: JSON.stringify(envelope({ amfFoo: 'x' })),
        reason: /\/amfFoo: .*extension attribute names/,
      },
      {
        what: 'object-valued extension',
        body: JSON.stringify(envelope({ myext: { nested: true } })),
        reason: /\/myext: extension attribute values must be/,
      },
      { what: 'data and data_base64', body: JSON.stringify(withDataBase64), reason: /data_base64/ },
      {
        what: 'batch content type',
        body: JSON.stringify([envelope()]),
        contentType: 'application/cloudevents-batch+json',
        reason: /batch mode/,
      },
    ];
    const refusedIds: string[] = [];
    for (const c of cases) {
      const res = await postRaw(mesh.url, c.body, c.contentType);
      expect(res.status, c.what).toBe(400);
      const body = (await res.json()) as PublishError;
      expect(body.error.code, c.what).toBe('INVALID_EVENT');
      expect(Array.isArray(body.error.reasons), c.what).toBe(true);
      expect(body.error.reasons!.length, c.what).toBeGreaterThan(0);
      expect(
        body.error.reasons!.some((r) => c.reason.test(r)),
        `${c.what}: ${JSON.stringify(body.error.reasons)}`,
      ).toBe(true);
      try {
        const parsed = JSON.parse(c.body) as { id?: string } | Array<{ id?: string }>;
        for (const e of Array.isArray(parsed) ? parsed : [parsed]) if (e.id) refusedIds.push(e.id);
      } catch {
        // the not-JSON case has no id
      }
    }
    expect(refusedIds.length).toBeGreaterThanOrEqual(cases.length - 1);
    // A valid event sent afterwards by the same coordinator connection is seen after anything the
    // refused ones could have produced; once it arrives, none of them may have been published.
    const marker = sdkEvent('amf.evidence.publish', { marker: true });
    expect((await postMessage(mesh.url, HTTP.structured(marker))).status).toBe(202);
    await mesh.waitForEvent((e) => e.event.id === marker.id);
    expect(mesh.events.filter((e) => refusedIds.includes(e.event.id))).toEqual([]);
  });

  it('refuses an announcement whose reply subject names another task, and announces nothing', async () => {
    const taskId = randomUUID();
    const spoofed = sdkEvent('amf.task.announce', {
      task_id: taskId,
      task: 'steal replies',
      required_capability: 'echo',
      reply_subject: 'amf.internal.reply.someone-else',
    });
    const res = await postMessage(mesh.url, HTTP.structured(spoofed));
    expect(res.status).toBe(400);
    const body = (await res.json()) as PublishError;
    expect(body.error.message).toContain(`amf.internal.reply.${taskId}`);
    expect(mesh.coordinator.lifecycle.get(taskId)).toBeUndefined();
    // A good announcement afterwards completes; by then the spoofed one would have been seen.
    const goodId = randomUUID();
    const good = sdkEvent('amf.task.announce', {
      task_id: goodId,
      task: 'fine',
      required_capability: 'echo',
    });
    expect((await postMessage(mesh.url, HTTP.structured(good))).status).toBe(202);
    await mesh.waitForEvent((e) => e.subject === 'amf.result.final' && e.event.amftaskid === goodId);
    const leaked = mesh.events.filter(
      (e) =>
        e.event.id === spoofed.id ||
        e.event.amftaskid === taskId ||
        (e.event.data.payload as { task_id?: string }).task_id === taskId,
    );
    expect(leaked).toEqual([]);
  });

  it('lists announcement payload problems in error.reasons, like envelope problems (contract: 400 with reasons)', async () => {
    const taskId = randomUUID();
    const spoofed = sdkEvent('amf.task.announce', {
      task_id: taskId,
      task: 'steal replies',
      required_capability: 'echo',
      reply_subject: 'amf.internal.reply.someone-else',
    });
    const res = await postMessage(mesh.url, HTTP.structured(spoofed));
    expect(res.status).toBe(400);
    const body = (await res.json()) as PublishError;
    expect(body.error.reasons).toEqual(expect.arrayContaining([expect.stringMatching(/reply_subject/)]));
  });

  it('refuses an announcement whose task_id cannot be a subject token with 400, not 500', async () => {
    for (const taskId of ['has.dots', 'has space', 'wild*card']) {
      const ce = sdkEvent('amf.task.announce', { task_id: taskId, task: 'x', required_capability: 'echo' });
      const res = await postMessage(mesh.url, HTTP.structured(ce));
      const body = (await res.json()) as PublishError;
      expect(res.status, `${taskId}: ${JSON.stringify(body)}`).toBe(400);
      expect(body.error.message).toMatch(/task.id/);
      expect(mesh.coordinator.lifecycle.get(taskId)).toBeUndefined();
    }
  });
});

describe('POST /publish with an API key, without it', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { coordinator: { apiKey: 'k' } } });
  });
  afterAll(() => mesh?.close());

  it('answers 401 with a wrong key, 202 with Authorization: Bearer <key> or none (anonymous, on loopback)', async () => {
    const ce = sdkEvent('amf.evidence.publish', { guarded: true });
    const message = HTTP.structured(ce);
    const wrong = await postMessage(mesh.url, message, { authorization: 'Bearer wrong' });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as PublishError).error.code).toBe('UNAUTHORIZED');
    const anonymous = sdkEvent('amf.evidence.publish', { anonymous: true });
    expect((await postMessage(mesh.url, HTTP.structured(anonymous), {})).status).toBe(202);
    // ?api_key= is only for EventSource on /events, not a way around the header elsewhere: a key
    // sent there is refused rather than ignored.
    const viaQuery = await fetch(`${mesh.url}/publish?api_key=k`, {
      method: 'POST',
      headers: fetchHeaders(message),
      body: message.body as string,
    });
    expect(viaQuery.status).toBe(401);
    const ok = await postMessage(mesh.url, message, { authorization: 'Bearer k' });
    expect(ok.status).toBe(202);
    const seen = await mesh.waitForEvent((e) => e.event.id === ce.id);
    expect(seen.subject).toBe('amf.evidence.publish');
  });

  it('keeps /health and the agent card open', async () => {
    const health = await fetch(`${mesh.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok' });
    const card = await fetch(`${mesh.url}/.well-known/agent-card.json`);
    expect(card.status).toBe(200);
    const body = (await card.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ name: 'amf-coordinator' });
    expect(amfCardBlock(body)).toMatchObject({ nats_url: mesh.coordinator.natsUrl });
    // ...while the rest of the API stays closed.
    expect((await fetch(`${mesh.url}/agents`)).status).toBe(401);
  });
});
