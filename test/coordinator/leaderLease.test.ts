/**
 * The sweeper lease against a real nats-server: one holder among several contenders, a graceful
 * hand-over on close, and a takeover after the holder dies without giving the lease back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kvm, type KV } from '@nats-io/kv';
import { jetstreamManager } from '@nats-io/jetstream';
import { ensureFabricStores, LEASES_BUCKET } from '../../src/fabric/jetstream.js';
import { LeaderLease } from '../../src/coordinator/leaderLease.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const RENEW_MS = 200;
const TTL_MS = 1000;

async function waitFor<T>(check: () => T | undefined | false, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('LeaderLease', () => {
  let nats: TestNats;
  let leasesKv: () => Promise<KV>;

  beforeAll(async () => {
    nats = await startTestNats();
    const nc = await nats.connect('coordinator', 'lease-setup');
    await ensureFabricStores(nc);
    // Each lease gets its own connection, so "killing" a holder is closing its connection.
    leasesKv = async () => new Kvm(await nats.connect('coordinator', 'lease')).open(LEASES_BUCKET);
  });
  afterAll(async () => {
    await nats?.close();
  });

  it('the leases bucket reads through the stream leader, never a lagging replica', async () => {
    const jsm = await jetstreamManager(await nats.connect('coordinator', 'lease-info'));
    const info = await jsm.streams.info(`KV_${LEASES_BUCKET}`);
    expect(info.config.allow_direct).toBe(false);
  });

  it('exactly one of three contenders holds it; close hands it over at once', async () => {
    const key = 'one-of-three';
    const leases = await Promise.all(
      ['a', 'b', 'c'].map(
        async (id) =>
          new LeaderLease({
            kv: await leasesKv(),
            key,
            holderId: id,
            renewIntervalMs: RENEW_MS,
            ttlMs: TTL_MS,
          }),
      ),
    );
    const acquired: string[] = [];
    for (const l of leases) l.onAcquired(() => acquired.push(l.holderId));
    for (const l of leases) l.start();
    try {
      const first = await waitFor(() => leases.find((l) => l.isHolder), 5000, 'a first holder');
      // Several renewal rounds later there is still exactly one holder, and it is the same one.
      const settleUntil = Date.now() + 4 * RENEW_MS;
      while (Date.now() < settleUntil) {
        expect(leases.filter((l) => l.isHolder).map((l) => l.holderId)).toEqual([first.holderId]);
        await new Promise((r) => setTimeout(r, RENEW_MS / 4));
      }
      expect(acquired).toEqual([first.holderId]);

      const lost: string[] = [];
      first.onLost((reason) => lost.push(reason));
      await first.close();
      expect(first.isHolder).toBe(false);
      expect(lost).toEqual(['closed']);
      const rest = leases.filter((l) => l !== first);
      // Given back by a delete, so the next holder appears within a few renew intervals, not a TTL.
      const second = await waitFor(() => rest.find((l) => l.isHolder), 5 * RENEW_MS, 'a second holder');
      expect(rest.filter((l) => l.isHolder)).toEqual([second]);
    } finally {
      await Promise.all(leases.map((l) => l.close()));
    }
  });

  it('a holder that dies without giving it back is replaced after its TTL, and steps down itself', async () => {
    const key = 'killed-holder';
    const holderNc = await nats.connect('coordinator', 'lease-doomed');
    const doomed = new LeaderLease({
      kv: await new Kvm(holderNc).open(LEASES_BUCKET),
      key,
      holderId: 'doomed',
      renewIntervalMs: RENEW_MS,
      ttlMs: TTL_MS,
    }).start();
    await waitFor(() => doomed.isHolder, 5000, 'the first holder');
    const heir = new LeaderLease({
      kv: await leasesKv(),
      key,
      holderId: 'heir',
      renewIntervalMs: RENEW_MS,
      ttlMs: TTL_MS,
    }).start();
    try {
      // Cut the holder off from NATS: it can neither renew nor give the lease back.
      await holderNc.close();
      await waitFor(() => heir.isHolder, TTL_MS + 10 * RENEW_MS, 'the heir to take over');
      // The old holder's own clock stopped it acting as holder before the heir could start.
      expect(doomed.isHolder).toBe(false);
    } finally {
      await doomed.close();
      await heir.close();
    }
  });

  it('refuses a TTL too short for its renew interval', async () => {
    const kv = await leasesKv();
    expect(
      () => new LeaderLease({ kv, key: 'x', holderId: 'x', renewIntervalMs: 1000, ttlMs: 2000 }),
    ).toThrow(/at least 3/);
  });
});
