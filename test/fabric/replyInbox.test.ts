// Requests and JetStream publishes over one reply subscription per connection, against a real
// nats-server: answers go to the request that asked, silence is a timeout, nobody listening is "no
// responders", a stream's acknowledgement carries the sequence and tells a duplicate message id.
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from '../../src/fabric/connect.js';
import { ReplyInbox } from '../../src/fabric/replyInbox.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const STREAM = 'REPLY_INBOX_TEST';

let nats: TestNats;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await nats.connect('coordinator', 'reply-inbox');
  const responder = await nats.connect('coordinator', 'responder');
  responder.subscribe('test.echo', {
    callback: (_err, msg) => {
      msg.respond(encoder.encode(`echo ${decoder.decode(msg.data)}`));
    },
  });
  responder.subscribe('test.slow', {
    callback: (_err, msg) => {
      setTimeout(() => msg.respond(encoder.encode('late')), 300);
    },
  });
  await responder.flush();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: STREAM, subjects: ['test.stored.>'] });
});

afterAll(async () => {
  await nats?.close();
});

describe('ReplyInbox', () => {
  it('is one per connection, and every answer reaches the request that asked', async () => {
    const inbox = ReplyInbox.of(nc);
    expect(ReplyInbox.of(nc)).toBe(inbox);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        inbox.request('test.echo', encoder.encode(String(i)), { timeoutMs: 5_000 }),
      ),
    );
    expect(answers.map((m) => decoder.decode(m.data))).toEqual(
      Array.from({ length: 50 }, (_, i) => `echo ${i}`),
    );
    expect(inbox.pending).toBe(0);
  });

  it('rejects with no responders when nothing listens, and with a timeout when nothing answers in time', async () => {
    const inbox = ReplyInbox.of(nc);
    await expect(inbox.request('test.nobody', encoder.encode('x'), { timeoutMs: 5_000 })).rejects.toThrow(
      /no responders/,
    );
    await expect(inbox.request('test.slow', encoder.encode('x'), { timeoutMs: 50 })).rejects.toThrow(
      /timeout/,
    );
    expect(inbox.pending).toBe(0);
    // The late answer finds no request waiting and is dropped.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(inbox.pending).toBe(0);
  });

  it('publishes into a stream: the sequence comes back, a repeated message id is a duplicate', async () => {
    const inbox = ReplyInbox.of(nc);
    const first = await inbox.publishToStream('test.stored.a', encoder.encode('1'), { timeoutMs: 5_000 });
    const second = await inbox.publishToStream('test.stored.b', encoder.encode('2'), {
      timeoutMs: 5_000,
      msgId: 'once',
    });
    expect(first).toMatchObject({ stream: STREAM, duplicate: false });
    expect(second.seq).toBe(first.seq + 1);
    const again = await inbox.publishToStream('test.stored.b', encoder.encode('2'), {
      timeoutMs: 5_000,
      msgId: 'once',
    });
    expect(again).toEqual({ stream: STREAM, seq: second.seq, duplicate: true });
    const jsm = await jetstreamManager(nc);
    expect((await jsm.streams.info(STREAM)).state.messages).toBe(2);
    // No stream on the subject: the server says nobody listens.
    await expect(
      inbox.publishToStream('test.unstored', encoder.encode('3'), { timeoutMs: 5_000 }),
    ).rejects.toThrow(/no responders/);
  });

  it('a closed connection refuses the publish at once', async () => {
    const closing = await nats.connect('coordinator', 'closing');
    const inbox = ReplyInbox.of(closing);
    await closing.close();
    await expect(inbox.request('test.echo', encoder.encode('x'), { timeoutMs: 5_000 })).rejects.toThrow();
    expect(inbox.pending).toBe(0);
  });
});
