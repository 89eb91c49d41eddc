import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { OwnEchoes } from '../../src/fabric/ownEchoes.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';
import { waitFor } from '../helpers/waitFor.js';

const bytes = (text: string) => Buffer.from(text);

describe('OwnEchoes', () => {
  it('recognises a remembered message byte for byte, once', () => {
    const echoes = new OwnEchoes();
    echoes.expect(bytes('{"id":"a","n":1}'));
    expect(echoes.take(bytes('{"id":"a","n":1}'))).toBe(true);
    expect(echoes.take(bytes('{"id":"a","n":1}'))).toBe(false);
    expect(echoes.size).toBe(0);
  });

  it('never takes a message that differs, even after the hashed prefix or in one byte of equal length', () => {
    const echoes = new OwnEchoes();
    const prefix = 'x'.repeat(200);
    echoes.expect(bytes(`${prefix}-tail-1`));
    expect(echoes.take(bytes(`${prefix}-tail-2`))).toBe(false); // same length, same first 96 bytes
    expect(echoes.take(bytes(`${prefix}-tail-11`))).toBe(false);
    expect(echoes.take(bytes(`${prefix}-tail-1`))).toBe(true);
  });

  it('keeps equal prefixes apart (one bucket) and the same bytes expected twice as two copies', () => {
    const echoes = new OwnEchoes();
    const prefix = 'p'.repeat(120);
    for (let i = 0; i < 10; i++) echoes.expect(bytes(`${prefix}${i}`));
    echoes.expect(bytes(`${prefix}3`));
    expect(echoes.size).toBe(11);
    expect(echoes.take(bytes(`${prefix}3`))).toBe(true);
    expect(echoes.take(bytes(`${prefix}3`))).toBe(true);
    expect(echoes.take(bytes(`${prefix}3`))).toBe(false);
    for (let i = 9; i >= 0; i--) if (i !== 3) expect(echoes.take(bytes(`${prefix}${i}`))).toBe(true);
    expect(echoes.size).toBe(0);
  });

  it('forgets the oldest copies beyond its bound', () => {
    const echoes = new OwnEchoes(4);
    for (let i = 0; i < 6; i++) echoes.expect(bytes(`message ${i}`));
    expect(echoes.size).toBe(4);
    expect(echoes.take(bytes('message 0'))).toBe(false);
    expect(echoes.take(bytes('message 1'))).toBe(false);
    expect(echoes.take(bytes('message 5'))).toBe(true);
    // Slots are reused in turn: a taken copy's slot is empty, the others are forgotten when reached.
    for (let i = 6; i < 9; i++) echoes.expect(bytes(`message ${i}`));
    expect(echoes.size).toBe(3);
    for (const i of [2, 3, 4]) expect(echoes.take(bytes(`message ${i}`))).toBe(false);
    for (const i of [6, 7, 8]) expect(echoes.take(bytes(`message ${i}`))).toBe(true);
    expect(echoes.size).toBe(0);
  });
});

describe('EventBus: own echoes and subject skips on a real nats-server', () => {
  let nats: TestNats;
  const sender: EventSender = {
    identity: 'coordinator',
    source: 'amf://coordinator/test',
    role: 'coordinator',
    trustDomain: 'local',
  };
  const heartbeat = (n: number) =>
    createEvent({
      type: 'amf.policy.warning',
      sender,
      payload: { reason: 'test', message: `event ${n}` },
    });

  beforeAll(async () => {
    nats = await startTestNats();
  });
  afterAll(async () => {
    await nats.close();
  });

  it('drops the copy of publishOwn on dropOwnEchoes subscriptions only; others and other publishers still arrive', async () => {
    const nc = await nats.connect('coordinator', 'echo-owner');
    const bus = new EventBus(nc);
    const dropping: string[] = [];
    const plain: string[] = [];
    const invalid: string[] = [];
    bus.subscribe('amf.policy.>', (e) => dropping.push((e.data.payload as { message: string }).message), {
      dropOwnEchoes: true,
      onInvalid: (errors) => invalid.push(...errors),
    });
    bus.subscribe('amf.policy.>', (e) => plain.push((e.data.payload as { message: string }).message));
    await bus.flush();

    const own = heartbeat(1);
    bus.publishOwn(own);
    bus.publish(heartbeat(2)); // published plainly: its echo is parsed as always
    const other = new EventBus(await nats.connect('coordinator', 'echo-other'));
    other.publish(heartbeat(3));
    await other.flush();
    await bus.flush();
    await waitFor(() => plain.length === 3, 'three events on the plain subscription', 5000);
    await waitFor(() => dropping.length === 2, 'two events on the dropping subscription', 5000);
    expect([...plain].sort()).toEqual(['event 1', 'event 2', 'event 3']);
    expect([...dropping].sort()).toEqual(['event 2', 'event 3']);
    // The echo was taken once: the same event sent again (a replay from another connection) is
    // parsed and handled as any event.
    other.publish(own);
    await other.flush();
    await waitFor(() => dropping.length === 3, 'the replay on the dropping subscription', 5000);
    expect(dropping[2]).toBe('event 1');
    expect(invalid).toEqual([]);

    // A durable publish of an own event: its core copies go out first, and its echo is dropped too.
    const copies: string[] = [];
    const sub = nc.subscribe('test.copy.>', {
      callback: (_e, m) => {
        copies.push(m.subject);
      },
    });
    const stored = heartbeat(4);
    const outcome = await bus.publishDurable(stored, 'amf.policy.warning', {
      msgId: 'own-echo-test-4',
      giveUpMs: 300,
      alsoOn: ['test.copy.a'],
      ownEvent: true,
    });
    // No stream captures amf.policy.* on this bare server: the store gives up, the copies still left.
    expect(['stored', 'gave_up']).toContain(outcome);
    await waitFor(() => plain.includes('event 4'), 'the durable event on the plain subscription', 5000);
    await waitFor(() => copies.length === 1, 'the core copy', 5000);
    expect(dropping).not.toContain('event 4');
    sub.unsubscribe();
  });

  it('skipSubject drops a message before it is decoded: not even its bad JSON is reported', async () => {
    const nc = await nats.connect('coordinator', 'skip-subject');
    const bus = new EventBus(nc);
    const seen: string[] = [];
    const invalid: string[] = [];
    bus.subscribe('amf.internal.reply.>', (_e, subject) => seen.push(subject), {
      validation: 'shape',
      skipSubject: (subject) => subject.endsWith('.ended'),
      onInvalid: (_errors, subject) => invalid.push(subject),
    });
    await bus.flush();
    nc.publish('amf.internal.reply.ended', 'not json');
    nc.publish('amf.internal.reply.waiting', 'not json');
    await nc.flush();
    await waitFor(() => invalid.length === 1, 'the bad message on the waited-on subject', 5000);
    expect(invalid).toEqual(['amf.internal.reply.waiting']);
    expect(seen).toEqual([]);
  });
});
