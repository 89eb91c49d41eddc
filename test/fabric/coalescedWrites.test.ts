/**
 * AMF's NATS connections write what a turn of the event loop queued in one socket write, in order,
 * and lose nothing on drain. Real nats-server; the socket writes are counted on the connection's
 * own socket.
 */
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coalesceWrites } from '../../src/fabric/coalescedWrites.js';
import type { NatsConnection } from '../../src/fabric/connect.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

/** Counts write() calls on the connection's current socket (nats.js internals, test only). */
function countWrites(nc: NatsConnection): { readonly count: number } {
  const socket = (nc as unknown as { protocol: { transport: { socket: Socket } } }).protocol.transport.socket;
  const counter = { count: 0 };
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  (socket as unknown as { write: (...args: unknown[]) => boolean }).write = (...args) => {
    counter.count++;
    return write(...args);
  };
  return counter;
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('coalesced NATS writes', () => {
  let nats: TestNats;
  let reader: NatsConnection;

  beforeAll(async () => {
    nats = await startTestNats();
    reader = await nats.connect('coordinator', 'reader');
  });

  afterAll(async () => {
    await nats?.close();
  });

  it('publishes from several callbacks of one turn leave in one write, in order', async () => {
    const writer = await nats.connect('coordinator', 'writer');
    const got: string[] = [];
    const sub = reader.subscribe('coalesce.order', { callback: (_e, m) => void got.push(m.string()) });
    await reader.flush();
    await writer.flush();
    const writes = countWrites(writer);
    // Three separate microtask checkpoints within one turn: nats.js alone would write three times.
    writer.publish('coalesce.order', '1');
    await Promise.resolve();
    writer.publish('coalesce.order', '2');
    await new Promise<void>((resolve) => queueMicrotask(resolve));
    writer.publish('coalesce.order', '3');
    await Promise.resolve();
    expect(writes.count).toBe(0);
    await nextTurn();
    expect(writes.count).toBe(1);
    await writer.flush();
    await reader.flush();
    expect(got).toEqual(['1', '2', '3']);
    sub.unsubscribe();
  });

  it('writes at once when the queue reaches nats.js’s threshold, and a big burst arrives whole', async () => {
    const writer = await nats.connect('coordinator', 'burst');
    let received = 0;
    const sub = reader.subscribe('coalesce.burst', { callback: () => void received++ });
    await reader.flush();
    await writer.flush();
    const writes = countWrites(writer);
    const payload = new Uint8Array(1024);
    for (let i = 0; i < 100; i++) writer.publish('coalesce.burst', payload);
    // About 100 KB queued, over the 32 KB threshold: some went out before the end of the turn.
    expect(writes.count).toBeGreaterThan(0);
    await writer.flush();
    await reader.flush();
    expect(received).toBe(100);
    sub.unsubscribe();
  });

  it('what was published just before drain() still arrives', async () => {
    const writer = await nats.connect('coordinator', 'closer');
    const got: string[] = [];
    const sub = reader.subscribe('coalesce.close', { callback: (_e, m) => void got.push(m.string()) });
    await reader.flush();
    await writer.flush();
    writer.publish('coalesce.close', 'last words');
    await writer.drain();
    for (let i = 0; i < 50 && got.length === 0; i++) await reader.flush();
    expect(got).toEqual(['last words']);
    sub.unsubscribe();
  });

  it('leaves alone what is not a nats.js connection', () => {
    expect(coalesceWrites({} as NatsConnection)).toBe(false);
  });
});
