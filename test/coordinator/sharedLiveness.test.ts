// What a coordinator back from a partition asks the shared registry (issue 28): only about agents it
// marked offline for silence, at most once a second each; a claim, an unserved tag or a lost
// worker's tasks are decided on the shared view when this coordinator's own is stale. The registry
// is the real one (pure state, injected clock); the shared registry is a map the test writes, read
// as the coordinator reads the bucket (test/cluster/partitionHeal.test.ts does it on NATS).
import { describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { AgentRegistry, type RegisteredAgent } from '../../src/registry/agentRegistry.js';
import { SharedLiveness } from '../../src/coordinator/sharedLiveness.js';

const record = (id: string, tags: string[], nkey = `UKEY${id.toUpperCase()}`): AgentRecord => ({
  agent_id: id,
  endpoint: `http://127.0.0.1:9/${id}`,
  protocols_supported: ['A2A/1.0'],
  capability_tags: tags,
  nkey,
  heartbeat_seconds: 1,
});

function setup(options: { holder?: boolean; connected?: boolean } = {}) {
  let now = 0;
  const registry = new AgentRegistry({ defaultHeartbeatSeconds: 1, offlineAfterMissed: 3, now: () => now });
  const shared = new Map<string, RegisteredAgent>();
  const reads: string[] = [];
  let unreachable = false;
  const returns: (ReadonlySet<string> | 'all')[] = [];
  const liveness = new SharedLiveness({
    registry,
    readShared: (id) => {
      reads.push(id);
      if (unreachable) return Promise.reject(new Error('no leader'));
      const entry = shared.get(id);
      return Promise.resolve(entry ? structuredClone(entry) : null);
    },
    isHolder: () => options.holder ?? false,
    connected: () => options.connected ?? true,
    onReturn: (agents) => returns.push(agents),
    log: () => undefined,
    now: () => now,
  });
  liveness.start();
  /** Admits `id` here and in the shared registry, then lets this coordinator miss its heartbeats. */
  const goneSilent = (id: string, tags: string[]) => {
    registry.admit(record(id, tags));
    shared.set(id, structuredClone(registry.get(id) as RegisteredAgent));
  };
  return {
    registry,
    shared,
    reads,
    returns,
    liveness,
    goneSilent,
    advance: (ms: number) => (now += ms),
    cutOff: (cut: boolean) => (unreachable = cut),
  };
}

describe('the shared registry asked by a coordinator back from a partition', () => {
  it('takes the claim of an agent it gave up for silence when the shared registry holds it live', async () => {
    const t = setup();
    t.goneSilent('w1', ['echo']);
    t.advance(4_000);
    expect(t.registry.sweep()).toEqual(['w1']);
    const asked = t.liveness.confirmLive('w1');
    expect(asked).toBeDefined();
    expect(await asked).toBe(true);
    expect(t.registry.isLive('w1')).toBe(true);
    // The claim was its sign of life: it stays live for a whole silence window from now.
    t.advance(2_900);
    expect(t.registry.sweep()).toEqual([]);
  });

  it('asks nothing about an agent that went away for another reason, or was never admitted', () => {
    const t = setup();
    t.goneSilent('w1', ['echo']);
    t.registry.markOffline('w1', 'goodbye');
    expect(t.liveness.confirmLive('w1')).toBeUndefined();
    expect(t.liveness.confirmLive('stranger')).toBeUndefined();
    expect(t.reads).toEqual([]);
  });

  it('refuses when the shared registry has it offline too, or cannot be read; reads once a second', async () => {
    const t = setup();
    t.goneSilent('w1', ['echo']);
    t.advance(4_000);
    t.registry.sweep();
    t.cutOff(true);
    expect(await t.liveness.confirmLive('w1')).toBe(false);
    expect(await t.liveness.confirmLive('w1')).toBe(false);
    expect(t.reads).toEqual(['w1']);
    t.cutOff(false);
    t.shared.set('w1', { ...(t.shared.get('w1') as RegisteredAgent), status: 'offline' });
    t.advance(1_000);
    expect(await t.liveness.confirmLive('w1')).toBe(false);
    expect(t.reads).toEqual(['w1', 'w1']);
  });

  it('revives no other advertisement than the one this coordinator admitted', async () => {
    const t = setup();
    t.goneSilent('w1', ['echo']);
    t.advance(4_000);
    t.registry.sweep();
    const changed = structuredClone(t.shared.get('w1') as RegisteredAgent);
    changed.record.endpoint = 'http://10.0.0.9:9/w1';
    t.shared.set('w1', changed);
    expect(await t.liveness.confirmLive('w1')).toBe(false);
    expect(t.registry.get('w1')?.status).toBe('offline');
  });

  it('serves an unknown model again from the agents of its tag the shared registry holds live', async () => {
    const t = setup();
    t.goneSilent('w1', ['echo']);
    t.goneSilent('w2', ['calc']);
    t.advance(4_000);
    t.registry.sweep();
    expect(await t.liveness.confirmTag('echo')).toBe(true);
    expect(t.reads).toEqual(['w1']);
    expect(t.registry.servesTag('calc')).toBe(false);
    expect(await t.liveness.confirmTag('nobody')).toBe(false);
    expect(t.reads).toEqual(['w1']);
    // Without a heartbeat the revival lasts one heartbeat period.
    t.advance(1_100);
    expect(t.registry.sweep()).toEqual(['w1']);
  });

  it("decides a lost worker's tasks only on the shared registry's word", async () => {
    const cut = setup({ connected: false });
    cut.goneSilent('w1', ['echo']);
    cut.advance(4_000);
    cut.registry.sweep();
    expect(await cut.liveness.confirmSilence('w1')).toBe('unreachable');
    // Still cut off, the 404 is true at once: nothing is read.
    expect(await cut.liveness.confirmTag('echo')).toBe(false);
    expect(cut.reads).toEqual([]);

    const holder = setup({ holder: true });
    holder.goneSilent('w1', ['echo']);
    holder.advance(4_000);
    holder.registry.sweep();
    expect(await holder.liveness.confirmSilence('w1')).toBe('lost');
    expect(holder.reads).toEqual([]);

    const other = setup();
    other.goneSilent('w1', ['echo']);
    other.advance(4_000);
    other.registry.sweep();
    expect(await other.liveness.confirmSilence('w1')).toBe('live');
    other.cutOff(true);
    other.advance(1_000);
    expect(await other.liveness.confirmSilence('w1')).toBe('unreachable');
    other.cutOff(false);
    other.shared.delete('w1');
    other.advance(1_000);
    expect(await other.liveness.confirmSilence('w1')).toBe('lost');
  });

  it('reads every agent it gave up again when one of them is heard again, and says who is back', async () => {
    const t = setup();
    t.goneSilent('w1', ['echo']);
    t.goneSilent('w2', ['echo']);
    t.advance(4_000);
    expect(t.registry.sweep().sort()).toEqual(['w1', 'w2']);
    // w1's heartbeat arrives: w2, given up at the same moment, is read again and live too.
    t.registry.admit(record('w1', ['echo']));
    await expect.poll(() => t.returns.length).toBe(1);
    expect(t.registry.isLive('w2')).toBe(true);
    expect([...(t.returns[0] as ReadonlySet<string>)].sort()).toEqual(['w1', 'w2']);
  });
});
