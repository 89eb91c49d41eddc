// Freshness of agents' signed events (docs/security.md, "Every event is fresh"): the time window, the
// run of the key (amfepoch) and its sequence (amfseq), with a fake clock. A replay — of the same
// event, of an event from the agent's previous run seconds old, of a goodbye half an hour old — is
// refused; reordered events and the reply-subject copy of a claim are not.
import { describe, expect, it } from 'vitest';
import { createEvent, type AmfEvent } from '../../src/events/cloudEvent.js';
import { EventFreshness } from '../../src/coordinator/tasks/eventFreshness.js';
import { EventAuthenticity } from '../../src/coordinator/tasks/eventAuthenticity.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { signEvent } from '../../src/identity/eventSignature.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';
import type { PolicyNotices } from '../../src/registry/policyNotices.js';

const KEY = 'UAAGENTKEYAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
const sender = {
  identity: 'spiffe://local/worker/w1',
  source: 'http://127.0.0.1:1',
  role: 'specialist' as const,
  trustDomain: 'local',
};

function event(
  type: 'amf.discovery.agent.heartbeat' | 'amf.task.claim' | 'amf.task.progress',
  at: number,
  epoch: number | undefined,
  seq: number | undefined,
): AmfEvent {
  const e = createEvent({
    type,
    sender,
    payload:
      type === 'amf.discovery.agent.heartbeat'
        ? {
            agent_id: sender.identity,
            endpoint: sender.source,
            protocols_supported: ['A2A/1.0'],
            status: 'offline',
          }
        : { task_id: 't1', agent_id: sender.identity, required_capability: 'echo', attempt: 1, message: 'm' },
  }) as AmfEvent;
  e.time = new Date(at).toISOString();
  const attrs = e as unknown as Record<string, unknown>;
  if (epoch !== undefined) attrs.amfepoch = String(epoch);
  if (seq !== undefined) attrs.amfseq = seq;
  return e;
}

describe('EventFreshness', () => {
  const T0 = 1_800_000_000_000;

  it('refuses a goodbye sent half an hour ago, and one dated in the future', () => {
    let now = T0;
    const f = new EventFreshness({ now: () => now });
    const goodbye = event('amf.discovery.agent.heartbeat', T0, T0 - 60_000, 7);
    now = T0 + 28 * 60_000;
    expect(f.take(goodbye, KEY)).toMatchObject({ ok: false, reason: 'stale_event' });
    now = T0;
    expect(f.take(event('amf.discovery.agent.heartbeat', T0 + 120_000, T0, 1), KEY)).toMatchObject({
      ok: false,
      reason: 'stale_event',
    });
  });

  it('takes each heartbeat once: the same one again, seconds later, is a replay', () => {
    let now = T0;
    const f = new EventFreshness({ now: () => now });
    const beat = event('amf.discovery.agent.heartbeat', T0, T0 - 1000, 3);
    expect(f.take(beat, KEY)).toEqual({ ok: true });
    now += 50;
    expect(f.take(beat, KEY)).toMatchObject({ ok: false, reason: 'replayed_event' });
    expect(f.take(event('amf.discovery.agent.heartbeat', now, T0 - 1000, 4), KEY)).toEqual({ ok: true });
  });

  it("refuses the agent's own event from its previous run, seconds old", () => {
    let now = T0;
    const f = new EventFreshness({ now: () => now });
    const oldRun = T0 - 5_000;
    const goodbye = event('amf.discovery.agent.heartbeat', T0 - 2_000, oldRun, 41);
    // Never seen here before the restart: the new run is seen first, then the old goodbye comes.
    expect(f.take(event('amf.discovery.agent.heartbeat', T0, T0 - 500, 0), KEY)).toEqual({ ok: true });
    now += 100;
    expect(f.take(goodbye, KEY)).toMatchObject({ ok: false, reason: 'replayed_event' });
    expect(f.take(goodbye, KEY).ok).toBe(false);
  });

  it('takes events reordered across connections once each, and the copy of a claim within the grace', () => {
    let now = T0;
    const f = new EventFreshness({ now: () => now, window: 8, copyGraceMs: 1000 });
    const epoch = T0 - 1000;
    const claim = event('amf.task.claim', T0, epoch, 5);
    expect(f.take(event('amf.task.progress', T0, epoch, 6), KEY)).toEqual({ ok: true });
    expect(f.take(claim, KEY)).toEqual({ ok: true }); // behind the newest, not seen: taken
    expect(f.take(claim, KEY)).toEqual({ ok: true }); // its reply-subject copy
    now += 2000;
    expect(f.take(claim, KEY)).toMatchObject({ ok: false, reason: 'replayed_event' });
    expect(f.take(event('amf.task.progress', now, epoch, 100), KEY)).toEqual({ ok: true });
    // Fallen out of the window: refused, whether seen or not.
    expect(f.take(event('amf.task.progress', now, epoch, 7), KEY)).toMatchObject({
      ok: false,
      reason: 'replayed_event',
    });
  });

  it('refuses a signed event without amfepoch/amfseq', () => {
    const f = new EventFreshness({ now: () => T0 });
    expect(f.take(event('amf.task.claim', T0, undefined, undefined), KEY)).toMatchObject({
      ok: false,
      reason: 'unsequenced_event',
    });
  });

  it('every signEvent is a new statement: a larger amfseq of the same run', () => {
    const key = createEphemeralAgentKey();
    const a = signEvent(event('amf.task.claim', Date.now(), undefined, undefined), key) as unknown as Record<
      string,
      unknown
    >;
    const b = signEvent(event('amf.task.claim', Date.now(), undefined, undefined), key) as unknown as Record<
      string,
      unknown
    >;
    expect(a.amfepoch).toBe(b.amfepoch);
    expect(b.amfseq).toBe((a.amfseq as number) + 1);
  });
});

describe('EventAuthenticity refuses and warns a replayed heartbeat of an admitted agent', () => {
  it('warns once per window, naming the agent whose event was replayed', () => {
    const key = createEphemeralAgentKey();
    const registry = new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3 });
    registry.admit({
      agent_id: sender.identity,
      endpoint: sender.source,
      protocols_supported: ['A2A/1.0'],
      nkey: key.publicKey,
    });
    const warnings: Array<Record<string, unknown>> = [];
    const notices = { warn: (w: Record<string, unknown>) => warnings.push(w) } as unknown as PolicyNotices;
    const authenticity = new EventAuthenticity({ registry, notices });
    const beat = signEvent(event('amf.discovery.agent.heartbeat', Date.now(), undefined, undefined), key);
    const wire = JSON.stringify(beat);
    expect(authenticity.accept(JSON.parse(wire) as AmfEvent, 'the heartbeat door')).toBe(true);
    for (let i = 0; i < 20; i++)
      expect(authenticity.accept(JSON.parse(wire) as AmfEvent, 'the heartbeat door')).toBe(false);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ reason: 'replayed_event', agent_id: sender.identity });
    expect(String(warnings[0]!.message)).toMatch(/not fresh: amfseq \d+ of this run was taken/);
  });
});
