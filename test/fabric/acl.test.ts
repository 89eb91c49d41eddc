/**
 * The per-role ACLs against a real nats-server. Forbidden operations are proven absent without
 * sleeping: each forbidden publish is followed by an allowed "sentinel" from the same connection,
 * and NATS keeps per-publisher order, so once the sentinel arrives the forbidden message would have
 * arrived before it. The refusal itself is observed as the server's -ERR, which nats.js v3 turns
 * into a PermissionViolationError on nc.status() (and, for a subscription, on sub.closed).
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { ensureFabricStores } from '../../src/fabric/jetstream.js';
import { WorkQueuePuller, WorkQueueWriter, type WorkItem } from '../../src/fabric/workQueue.js';
import { resultSubject, workConsumerName } from '../../src/events/subjects.js';
import {
  errors,
  type Msg,
  type NatsConnection,
  type PermissionViolationError,
} from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLE_PERMISSIONS } from '../../src/fabric/natsServer/config.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const WAIT_MS = 5_000;

/** An append-only list whose waitFor() resolves as soon as a matching item is pushed. */
class Recorder<T> {
  readonly items: T[] = [];
  private readonly waiters = new Set<() => void>();

  push(item: T): void {
    this.items.push(item);
    for (const w of this.waiters) w();
  }

  waitFor(pred: (item: T) => boolean, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const check = (): boolean => {
        const hit = this.items.find(pred);
        if (hit === undefined) return false;
        clearTimeout(timer);
        this.waiters.delete(onPush);
        resolve(hit);
        return true;
      };
      const onPush = (): void => void check();
      const timer = setTimeout(() => {
        this.waiters.delete(onPush);
        reject(new Error(`timed out after ${WAIT_MS} ms waiting for ${what}`));
      }, WAIT_MS);
      if (!check()) this.waiters.add(onPush);
    });
  }
}

interface Received {
  subject: string;
  data: string;
}

/** Subscribes `nc` to each subject and records what arrives, flushing so the interest is live. */
async function record(nc: NatsConnection, subjects: string[]): Promise<Recorder<Received>> {
  const rec = new Recorder<Received>();
  for (const subject of subjects) {
    nc.subscribe(subject, {
      callback: (err, msg) => {
        if (!err) rec.push({ subject: msg.subject, data: msg.string() });
      },
    });
  }
  await nc.flush();
  return rec;
}

/** Collects the permission violations the server reports to `nc`. */
function permissionErrors(nc: NatsConnection): Recorder<PermissionViolationError> {
  const rec = new Recorder<PermissionViolationError>();
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'error' && s.error instanceof errors.PermissionViolationError) rec.push(s.error);
    }
  })();
  return rec;
}

/** Bounds a wait that would otherwise hang until the test timeout, with a message saying what. */
async function withDeadline<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${WAIT_MS} ms waiting for ${what}`)), WAIT_MS);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function violation(operation: 'publish' | 'subscription', subject: string) {
  return (e: PermissionViolationError): boolean => e.operation === operation && e.subject === subject;
}

let nats: TestNats;
let coord: NatsConnection;

beforeAll(async () => {
  nats = await startTestNats();
  coord = await nats.connect('coordinator');
});

afterAll(async () => {
  await nats?.close();
});

/**
 * Publishes `forbidden` then `sentinel` from `client`; returns once the coordinator saw the sentinel,
 * asserting it never saw the forbidden message and that `client` was told about the violation.
 */
async function expectPublishRefused(
  client: NatsConnection,
  forbidden: string,
  sentinel: string,
): Promise<void> {
  const rec = await record(coord, [forbidden, sentinel]);
  const perms = permissionErrors(client);
  client.publish(forbidden, 'forbidden');
  client.publish(sentinel, 'sentinel');
  await rec.waitFor((m) => m.subject === sentinel, `sentinel on ${sentinel}`);
  expect(rec.items.filter((m) => m.subject === forbidden)).toEqual([]);
  const err = await perms.waitFor(violation('publish', forbidden), `publish violation on ${forbidden}`);
  expect(err.message).toContain(`Permissions Violation for Publish to "${forbidden}"`);
  // A refused publish does not cost the connection.
  expect(client.isClosed()).toBe(false);
}

/** Subscribing to `subject` is refused: sub.closed resolves to the violation and nothing arrives. */
async function expectSubscribeRefused(
  client: NatsConnection,
  subject: string,
  published: string,
  sentinel: string,
) {
  const got: Msg[] = [];
  const perms = permissionErrors(client);
  const sub = client.subscribe(subject, {
    callback: (err, msg) => {
      if (!err) got.push(msg);
    },
  });
  const sentinelRec = await record(client, [sentinel]);
  const closedWith = await withDeadline(sub.closed, `subscription to ${subject} to be closed by the server`);
  expect(closedWith).toBeInstanceOf(errors.PermissionViolationError);
  expect((closedWith as PermissionViolationError).operation).toBe('subscription');
  await perms.waitFor(violation('subscription', subject), `subscription violation on ${subject}`);

  coord.publish(published, 'secret');
  coord.publish(sentinel, 'sentinel');
  await sentinelRec.waitFor(() => true, `sentinel on ${sentinel}`);
  expect(got).toEqual([]);
}

describe('connector', () => {
  it('cannot publish amf.task.announce.echo but can publish amf.internal.raw', async () => {
    const connector = await nats.connect('connector');
    await expectPublishRefused(connector, 'amf.task.announce.echo', 'amf.internal.raw');
  });

  it('cannot subscribe to anything but its own inbox', async () => {
    const connector = await nats.connect('connector');
    await expectSubscribeRefused(
      connector,
      'amf.>',
      'amf.task.announce.echo',
      '_INBOX.amf-connector.sentinel',
    );
  });
});

describe('specialist', () => {
  it('cannot subscribe amf.internal.raw and never receives what is published there', async () => {
    const spec = await nats.connect('specialist');
    await expectSubscribeRefused(spec, 'amf.internal.raw', 'amf.internal.raw', 'amf.task.progress');
  });

  it('cannot subscribe to other tasks replies (amf.internal.reply.*)', async () => {
    const spec = await nats.connect('specialist');
    await expectSubscribeRefused(spec, 'amf.internal.reply.*', 'amf.internal.reply.t1', 'amf.task.progress');
  });

  it("cannot read the coordinator's inbox (so no JetStream deliveries or KV reads leak)", async () => {
    const spec = await nats.connect('specialist');
    await expectSubscribeRefused(spec, '_INBOX.>', '_INBOX.amf-coordinator.x', 'amf.task.progress');
  });

  it('can publish amf.internal.reply.<id> and amf.result.final', async () => {
    const spec = await nats.connect('specialist');
    const rec = await record(coord, ['amf.internal.reply.task-1', 'amf.result.final']);
    spec.publish('amf.internal.reply.task-1', 'reply');
    spec.publish('amf.result.final', 'final');
    await rec.waitFor((m) => m.subject === 'amf.internal.reply.task-1', 'reply');
    await rec.waitFor((m) => m.subject === 'amf.result.final', 'final');
  });

  it('cannot publish amf.task.announce.x', async () => {
    const spec = await nats.connect('specialist');
    await expectPublishRefused(spec, 'amf.task.announce.x', 'amf.task.claim');
  });

  it('cannot publish amf.task.input (only a coordinator hands a task its follow-up)', async () => {
    const spec = await nats.connect('specialist');
    await expectPublishRefused(spec, 'amf.task.input', 'amf.task.claim');
  });

  it('cannot use JetStream or write KV', async () => {
    const spec = await nats.connect('specialist');
    // A refused request fails at once: nats.js wraps the violation in a RequestError.
    const err = await jetstreamManager(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(errors.RequestError);
    const cause = (err as Error).cause;
    expect(cause).toBeInstanceOf(errors.PermissionViolationError);
    expect((cause as PermissionViolationError).subject).toBe('$JS.API.INFO');
    await expectPublishRefused(spec, '$KV.registry.agent', 'amf.task.progress');
  });

  it('answers requests and makes them, each side on its own inbox', async () => {
    const spec = await nats.connect('specialist');
    spec.subscribe('amf.task.announce.echo', {
      callback: (_err, msg) => void msg.respond(`echo:${msg.string()}`),
    });
    coord.subscribe('amf.result.query', { callback: (_err, msg) => void msg.respond('answer') });
    await Promise.all([spec.flush(), coord.flush()]);
    expect((await coord.request('amf.task.announce.echo', 'hi', { timeout: WAIT_MS })).string()).toBe(
      'echo:hi',
    );
    expect((await spec.request('amf.result.query', 'q', { timeout: WAIT_MS })).string()).toBe('answer');
  });
});

describe('watcher', () => {
  it('reads amf.internal.raw and publishes amf.internal.classified', async () => {
    const watcher = await nats.connect('watcher');
    const raw = await record(watcher, ['amf.internal.raw']);
    const classified = await record(coord, ['amf.internal.classified']);
    coord.publish('amf.internal.raw', 'advert');
    await raw.waitFor((m) => m.data === 'advert', 'raw advert at the watcher');
    watcher.publish('amf.internal.classified', 'summary');
    await classified.waitFor((m) => m.data === 'summary', 'summary at the coordinator');
  });

  it('cannot publish amf.task.claim', async () => {
    const watcher = await nats.connect('watcher');
    await expectPublishRefused(watcher, 'amf.task.claim', 'amf.internal.classified');
  });
});

describe('ROLE_PERMISSIONS', () => {
  it('is frozen, so the policy cannot be changed at run time', () => {
    expect(Object.isFrozen(ROLE_PERMISSIONS.specialist.publish.allow)).toBe(true);
    expect(() => (ROLE_PERMISSIONS.specialist.publish.allow as string[]).push('>')).toThrow();
    expect(ROLE_PERMISSIONS.specialist.subscribe.deny).toContain('amf.internal.>');
    expect(ROLE_PERMISSIONS.specialist.publish.deny).toEqual(
      expect.arrayContaining([
        'amf.task.announce.>',
        '$KV.>',
        '$JS.API.STREAM.>',
        '$JS.API.CONSUMER.CREATE.>',
      ]),
    );
    // JetStream is open to specialists only for pulling and acknowledging work-queue messages.
    expect(ROLE_PERMISSIONS.specialist.publish.allow.filter((s) => s.startsWith('$JS'))).toEqual([
      '$JS.API.CONSUMER.INFO.AMF_WORK.*',
      '$JS.API.CONSUMER.MSG.NEXT.AMF_WORK.*',
      '$JS.ACK.AMF_WORK.>',
    ]);
  });

  // Last: creating the fabric's streams makes JetStream answer on amf.> subjects from here on.
  it('pulls and acknowledges work-queue messages and stores results, but cannot create a consumer', async () => {
    const coordNc = await nats.connect('coordinator');
    const stores = await ensureFabricStores(coordNc);
    const work = new WorkQueueWriter(coordNc, stores.jsm);
    await work.offer(new TextEncoder().encode('{"x":1}'), 'acl-test');
    const spec = await nats.connect('specialist');
    let puller: WorkQueuePuller | undefined;
    const item = await new Promise<WorkItem>((resolve) => {
      puller = new WorkQueuePuller(spec, workConsumerName('acl-test'), {
        onItem: resolve,
        onSettled: () => puller?.pull(1),
      });
      puller.pull(1);
    });
    puller?.close();
    expect(item.body).toEqual({ x: 1 });
    expect(item.deliveryCount).toBe(1);
    item.ack();
    const ack = await jetstream(spec).publish(resultSubject('task-acl'), 'result');
    expect(ack.stream).toBe('AMF_RESULTS');
    await expectPublishRefused(spec, '$JS.API.CONSUMER.CREATE.AMF_WORK.rogue', 'amf.task.progress');
  });
});
