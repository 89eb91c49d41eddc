// The worker's pull accounting against a real nats-server: what it still waits for is counted from
// its open pull requests, so an expiry whose count differs from ours cannot leave the worker
// believing it is owed messages for good (it would never pull again).
import { headers } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workConsumerName } from '../../src/events/subjects.js';
import { ensureFabricStores } from '../../src/fabric/jetstream.js';
import { WorkQueuePuller, WorkQueueWriter, type WorkItem } from '../../src/fabric/workQueue.js';
import type { NatsConnection } from '../../src/fabric/connect.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const TAG = 'pull-accounting';

/** Pulls until the consumer is known and one request for `n` is open (the first pulls only ask). */
async function openPull(puller: WorkQueuePuller, n: number): Promise<void> {
  await until(() => {
    if (puller.outstanding === 0 && !puller.paused) puller.pull(n);
    return puller.outstanding === n;
  }, `an open pull of ${n}`);
}

async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('WorkQueuePuller accounting', () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let writer: WorkQueueWriter;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await nats.connect('coordinator');
    await ensureFabricStores(nc);
    writer = new WorkQueueWriter(nc, await jetstreamManager(nc));
    await writer.ensureConsumer(TAG);
  });
  afterAll(() => nats?.close());

  it('counts delivered messages against its pull and owes nothing once they arrived', async () => {
    const items: WorkItem[] = [];
    const puller = new WorkQueuePuller(nc, workConsumerName(TAG), {
      onItem: (item, requested) => {
        expect(requested).toBe(true);
        items.push(item);
      },
      onSettled: () => undefined,
    });
    try {
      await openPull(puller, 2);
      await writer.offer(new TextEncoder().encode(JSON.stringify({ n: 1 })), TAG);
      await writer.offer(new TextEncoder().encode(JSON.stringify({ n: 2 })), TAG);
      await until(() => items.length === 2, 'two deliveries');
      expect(items.map((i) => i.body)).toEqual([{ n: 1 }, { n: 2 }]);
      expect(puller.outstanding).toBe(0);
      for (const item of items) item.ack();
    } finally {
      puller.close();
    }
  });

  it('owes nothing after an expiry whose pending count is lower than its own', async () => {
    const settled: number[] = [];
    const puller = new WorkQueuePuller(nc, workConsumerName(TAG), {
      onItem: () => undefined,
      onSettled: (undelivered) => settled.push(undelivered),
    });
    try {
      await openPull(puller, 4);
      // The expiry status the server sends for this request, with a pending count of 0 where the
      // worker counts 4 still owed (as when deliveries were counted against another request).
      const inbox = (puller as unknown as { inbox: string }).inbox;
      const requestId = [...(puller as unknown as { open: Map<string, unknown> }).open.keys()][0];
      const status = headers(408, 'Request Timeout');
      status.set('Nats-Pending-Messages', '0');
      nc.publish(`${inbox}.${requestId}`, new Uint8Array(), { headers: status });
      await until(() => puller.outstanding === 0, 'the expired pull to be forgotten');
      expect(settled.at(-1)).toBe(0); // told, so it pulls again at once
    } finally {
      puller.close();
    }
  });
});
