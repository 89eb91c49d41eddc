// The shared store of disabled agents (coordinator/disablementStore.ts) on a real nats-server: a
// notice of an older write, read from the bucket before the operator changed the same agent here,
// must not undo that change (an agent enabled again stays enabled), while a change made by another
// coordinator is taken.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KV, KvEntry } from '@nats-io/kv';
import { DisablementStore } from '../../src/coordinator/disablementStore.js';
import { ensureFabricStores, kvKey } from '../../src/fabric/jetstream.js';
import { jsonBytes } from '../../src/util/jsonBytes.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';
import { registryWith } from '../helpers/lifecycleFixture.js';
import { waitFor } from '../helpers/waitFor.js';

const AGENT = 'spiffe://local/worker/switched';

/**
 * `kv` whose reads of `key` are answered by the server at once but each handed back only when
 * released (`release(n)`, the n-th read): what a reconcile read is then older than a change that
 * lands meanwhile, and the state between two reconciles can be looked at.
 */
function heldReads(kv: KV, key: string): { kv: KV; reads: () => number; release: (n: number) => void } {
  const gates: { open: () => void; opened: Promise<void> }[] = [];
  const gate = (n: number) => {
    while (gates.length <= n) {
      let open: () => void = () => undefined;
      const opened = new Promise<void>((resolve) => (open = resolve));
      gates.push({ open, opened });
    }
    return gates[n]!;
  };
  let reads = 0;
  const proxy = new Proxy(kv, {
    get(target, prop, receiver) {
      if (prop !== 'get') return Reflect.get(target, prop, receiver) as unknown;
      return async (k: string): Promise<KvEntry | null> => {
        const n = k === key ? reads++ : -1;
        const entry = await target.get(k);
        if (n >= 0) await gate(n).opened;
        return entry;
      };
    },
  });
  return { kv: proxy, reads: () => reads, release: (n) => gate(n).open() };
}

describe('DisablementStore', () => {
  let nats: TestNats;
  let bucket: KV;

  beforeAll(async () => {
    nats = await startTestNats();
    bucket = (await ensureFabricStores(await nats.connect('coordinator'))).disabledAgents;
  });
  afterAll(async () => {
    await nats?.close();
  });

  it('keeps an agent enabled here although the notice of its earlier disable is read after', async () => {
    const registry = registryWith({ [AGENT]: ['echo'] });
    const held = heldReads(bucket, kvKey(AGENT));
    const store = new DisablementStore(held.kv, registry, () => undefined);
    await store.start();
    try {
      registry.disable(AGENT, 'operator');
      await store.settled();
      // The notice of that write is being reconciled: its read of the bucket saw the disablement.
      await waitFor(() => held.reads() >= 1, 'the reconcile of the disable', 5000);
      registry.enable(AGENT);
      await store.settled();
      // The older read returns after the enable landed; the enable's own notice waits behind it.
      held.release(0);
      await waitFor(() => held.reads() >= 2, 'the reconcile of the enable', 5000);
      expect(registry.isDisabled(AGENT)).toBe(false);
      held.release(1);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(registry.isDisabled(AGENT)).toBe(false);
      expect(await bucket.get(kvKey(AGENT))).toMatchObject({ operation: 'DEL' });
    } finally {
      store.close();
    }
  });

  it('takes a disablement another coordinator writes, and its lifting', async () => {
    const registry = registryWith({ [AGENT]: ['echo'] });
    const store = new DisablementStore(bucket, registry, () => undefined);
    await store.start();
    try {
      await bucket.put(
        kvKey(AGENT),
        jsonBytes({ agent_id: AGENT, by: 'elsewhere', disabled_at: new Date().toISOString() }),
      );
      await waitFor(() => registry.isDisabled(AGENT), 'the remote disable taken', 5000);
      await bucket.delete(kvKey(AGENT));
      await waitFor(() => !registry.isDisabled(AGENT), 'the remote enable taken', 5000);
    } finally {
      store.close();
    }
  });
});
