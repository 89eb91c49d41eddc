/**
 * Takes the next announcement of `tag` from the work queue, as a worker with a free slot does: the
 * item carries the offer nonce a claim of that task must name (coordinator/tasks/offerNonce.ts).
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { workConsumerName } from '../../src/events/subjects.js';
import { validateEvent } from '../../src/events/validateEvent.js';
import { WorkQueuePuller, type WorkItem } from '../../src/fabric/workQueue.js';

/** A pulled offer: its task id, its nonce and the item (ack it when done). */
export interface TakenOffer {
  taskId: string;
  offer: string;
  item: WorkItem;
}

/** Pulls one message of `tag`'s work queue over `nc` (a connection that may pull it). */
export async function takeOffer(nc: NatsConnection, tag: string, timeoutMs = 10_000): Promise<TakenOffer> {
  let puller: WorkQueuePuller | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    const item = await new Promise<WorkItem>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no offer of ${tag} within ${timeoutMs} ms`)), timeoutMs);
      puller = new WorkQueuePuller(nc, workConsumerName(tag), {
        onItem: resolve,
        onSettled: () => puller?.pull(1),
      });
      puller.pull(1);
    });
    const checked = validateEvent(item.body);
    if (!checked.ok || !item.offer) throw new Error('the work-queue message is not an offered announcement');
    return { taskId: checked.value.amftaskid!, offer: item.offer, item };
  } finally {
    clearTimeout(timer);
    puller?.close();
  }
}
