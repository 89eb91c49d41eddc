import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { calcHandler } from '../../src/worker/handlers/calc.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

/** Never answers until its task is cancelled: drives the 504 path. */
const stallHandler: WorkerHandler = {
  name: 'stall',
  description: 'waits until cancelled',
  handle: (ctx) =>
    new Promise((_resolve, reject) =>
      ctx.signal.addEventListener('abort', () => reject(new Error('cancelled'))),
    ),
};

describe('OpenAI-compatible API through the mesh', () => {
  let mesh: TestMesh;
  let client: OpenAI;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { openai: { requestTimeoutSeconds: 1 } } });
    await mesh.startWorker('echo-1', ['echo'], echoHandler);
    await mesh.startWorker('calc-1', ['calc'], calcHandler);
    await mesh.startWorker('stall-1', ['stall'], stallHandler);
    client = new OpenAI({ baseURL: `${mesh.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(() => mesh?.close());

  it('lists amf/<tag> for tags served by live agents', async () => {
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    expect(ids).toEqual(expect.arrayContaining(['amf/echo', 'amf/calc', 'amf/stall']));
    expect(ids.every((id) => id.startsWith('amf/'))).toBe(true);
  });

  it('answers a non-streaming completion from a worker over NATS', async () => {
    const res = await client.chat.completions.create({
      model: 'amf/echo',
      messages: [{ role: 'user', content: 'hello mesh' }],
    });
    expect(res.object).toBe('chat.completion');
    expect(res.choices[0]?.message.content).toBe('hello mesh');
    expect(res.choices[0]?.finish_reason).toBe('stop');
    expect(res.usage?.total_tokens).toBe(
      (res.usage?.prompt_tokens ?? 0) + (res.usage?.completion_tokens ?? 0),
    );
    const taskId = res.id.replace(/^chatcmpl-/, '');
    // The task really crossed the fabric: announce on the tag subject, a claim, a final result.
    await mesh.waitForEvent((e) => e.subject === 'amf.task.announce.echo' && e.event.amftaskid === taskId);
    await mesh.waitForEvent((e) => e.subject === 'amf.task.claim' && e.event.amftaskid === taskId);
    await mesh.waitForEvent((e) => e.subject === 'amf.result.final' && e.event.amftaskid === taskId);
    expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    // Its requester waits in the coordinator's own process and takes the final from there: no copy
    // goes to the reply subject.
    expect(mesh.events.filter((e) => e.subject === `amf.internal.reply.${taskId}`)).toEqual([]);
  });

  it('streams chunks with one id, the role first, finish_reason and a usage chunk', async () => {
    const stream = await client.chat.completions.create({
      model: 'amf/echo',
      messages: [{ role: 'user', content: 'one two three four' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const ids = new Set(chunks.map((c) => c.id));
    expect(ids.size).toBe(1);
    expect(chunks[0]?.choices[0]?.delta.role).toBe('assistant');
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe('one two three four');
    // More than one content chunk: the worker really streamed (amf.result.partial).
    expect(chunks.filter((c) => (c.choices[0]?.delta.content ?? '').length > 0).length).toBeGreaterThan(1);
    const finish = chunks.filter((c) => c.choices[0]?.finish_reason === 'stop');
    expect(finish).toHaveLength(1);
    const usage = chunks[chunks.length - 1];
    expect(usage?.choices).toEqual([]);
    expect(usage?.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('streams a non-streaming worker answer as one chunk', async () => {
    const stream = await client.chat.completions.create({
      model: 'amf/calc',
      messages: [{ role: 'user', content: '6*7' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('42');
  });

  it('answers 404 in OpenAI shape for an unknown model', async () => {
    await expect(
      client.chat.completions.create({
        model: 'amf/nobody-serves-this',
        messages: [{ role: 'user', content: 'x' }],
      }),
    ).rejects.toMatchObject({
      status: 404,
      code: 'model_not_found',
    });
    await expect(
      client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({
      status: 404,
    });
  });

  it('answers 400 with the offending parameter for invalid requests', async () => {
    const cases: Array<[unknown, string]> = [
      [{ model: 'amf/echo' }, 'messages'],
      [{ model: 'amf/echo', messages: [] }, 'messages'],
      [{ model: 'amf/echo', messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
      [{ model: 'amf/echo', messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
      [{ model: 'amf/echo', messages: [{ role: 'user', content: 'x' }], stream: 'yes' }, 'stream'],
      [{ messages: [{ role: 'user', content: 'x' }] }, 'model'],
    ];
    for (const [body, param] of cases) {
      const res = await fetch(`${mesh.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify(body),
      });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const json = (await res.json()) as { error: { type: string; param: string; message: string } };
      expect(json.error.type).toBe('invalid_request_error');
      expect(json.error.param).toBe(param);
    }
    const notJson = await fetch(`${mesh.url}/v1/chat/completions`, { method: 'POST', body: '{"model":' });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: { message: string } }).error.message).toMatch(
      /not valid JSON/,
    );
  });

  it('answers 504 when no result arrives in time, and the task still ends in one terminal event', async () => {
    const err = await client.chat.completions
      .create({ model: 'amf/stall', messages: [{ role: 'user', content: 'wait forever' }] })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 504 });
    const deny = await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.deny' &&
        (e.event.data.payload as { reason?: string }).reason === 'requester_timeout',
    );
    const taskId = deny.event.amftaskid!;
    expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    // The cancellation reached the worker: its handler was aborted and it published no result.
    await mesh.waitFor(() => mesh.coordinator.lifecycle.get(taskId)?.state === 'failed');
  });

  it('cancels the task of a client that hangs up before its answer, and the worker stops', async () => {
    const controller = new AbortController();
    const call = fetch(`${mesh.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'amf/stall', messages: [{ role: 'user', content: 'hang up on me' }] }),
      signal: controller.signal,
    }).catch((e: unknown) => e);
    const claim = await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.task.claim' &&
        mesh.coordinator.lifecycle.get(e.event.amftaskid ?? '')?.announce.data.payload.task ===
          'hang up on me',
    );
    const taskId = claim.event.amftaskid!;
    controller.abort();
    expect(await call).toMatchObject({ name: 'AbortError' });
    const deny = await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.deny' &&
        e.event.amftaskid === taskId &&
        (e.event.data.payload as { reason?: string }).reason === 'requester_cancelled',
    );
    expect((deny.event.data.payload as { terminal?: boolean }).terminal).toBe(true);
    expect(await settledTerminalEvents(mesh, taskId)).toHaveLength(1);
    await mesh.waitFor(() => mesh.coordinator.lifecycle.get(taskId)?.state === 'failed');
  });

  it('serves many concurrent completions without losing any', async () => {
    const texts = Array.from({ length: 100 }, (_, i) => `message ${i}`);
    const answers = await Promise.all(
      texts.map((t) =>
        client.chat.completions.create({ model: 'amf/echo', messages: [{ role: 'user', content: t }] }),
      ),
    );
    expect(answers.map((a) => a.choices[0]?.message.content)).toEqual(texts);
  });
});
