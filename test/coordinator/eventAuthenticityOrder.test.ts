// The coordinator's in-order authenticity check (the hot intakes: claims, progress, finals): the
// Ed25519 check runs off the event loop, yet verdicts come in arrival order with the same decisions
// and warnings as the inline check, and nothing is decided after close().
import { describe, expect, it } from 'vitest';
import { createEvent, type AmfEvent } from '../../src/events/cloudEvent.js';
import { createEphemeralAgentKey, type AgentKey } from '../../src/identity/agentKey.js';
import { signElsewhere } from '../helpers/signElsewhere.js';
import { EventAuthenticity } from '../../src/coordinator/tasks/eventAuthenticity.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';
import type { PolicyNotices } from '../../src/registry/policyNotices.js';

const alice = createEphemeralAgentKey();
const mallory = createEphemeralAgentKey();
const agents = new Map<string, AgentKey>([
  ['spiffe://local/worker/alice', alice],
  ['spiffe://local/worker/mallory', mallory],
]);

/** The real in-memory registry, with both agents admitted with their keys. */
const registry = new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3 });
for (const [agentId, key] of agents)
  registry.admit({
    agent_id: agentId,
    endpoint: 'http://127.0.0.1:9',
    protocols_supported: ['A2A/1.0'],
    capability_tags: ['echo'],
    nkey: key.publicKey,
  });

/** Policy notices recorded here instead of published (what the check warns is the subject). */
function checker(maxPending?: number, offload?: () => boolean) {
  const warnings: Array<Record<string, unknown>> = [];
  const notices = { warn: (w: Record<string, unknown>) => warnings.push(w) } as unknown as PolicyNotices;
  return {
    authenticity: new EventAuthenticity({
      registry,
      notices,
      ...(maxPending ? { maxPending } : {}),
      ...(offload ? { offload } : {}),
    }),
    warnings,
  };
}

/**
 * A claim in `agentId`'s name, signed with `key` (a forgery when it is another agent's key), as
 * another process would sign it: checked with Ed25519, not believed from this process's memory.
 */
function claim(agentId: string, key: AgentKey, taskId: string): AmfEvent {
  const sender = {
    identity: agentId,
    source: 'http://127.0.0.1:1',
    role: 'specialist' as const,
    trustDomain: 'local',
  };
  return signElsewhere(
    createEvent({
      type: 'amf.task.claim',
      sender,
      payload: { task_id: taskId, agent_id: agentId, required_capability: 'echo', attempt: 1 },
      taskId,
    }),
    key,
  );
}

describe('EventAuthenticity.acceptInOrder', () => {
  it('decides in arrival order, refusing and warning as the inline check does', async () => {
    const { authenticity, warnings } = checker();
    const verdicts: string[] = [];
    const events = [
      ['alice t1', claim('spiffe://local/worker/alice', alice, 't1')],
      ['forged t2', claim('spiffe://local/worker/alice', mallory, 't2')],
      ['mallory t3', claim('spiffe://local/worker/mallory', mallory, 't3')],
      ['alice t4', claim('spiffe://local/worker/alice', alice, 't4')],
    ] as const;
    for (const [name, event] of events)
      authenticity.acceptInOrder(event, 'amf.task.claim', (ok) => verdicts.push(`${name}: ${ok}`));
    expect(authenticity.pending).toBe(4);
    await expect.poll(() => verdicts.length).toBe(4);
    expect(verdicts).toEqual(['alice t1: true', 'forged t2: false', 'mallory t3: true', 'alice t4: true']);
    expect(warnings).toEqual([
      expect.objectContaining({
        reason: 'forged_event',
        agent_id: 'spiffe://local/worker/mallory',
        task_id: 't2',
        details: expect.objectContaining({ claimed_agent: 'spiffe://local/worker/alice' }),
      }),
    ]);
    // The inline check of the same forgery agrees.
    expect(checker().authenticity.accept(claim('spiffe://local/worker/alice', mallory, 't5'), 'x')).toBe(
      false,
    );
  });

  it('a copy verified once is decided at once, behind what arrived before it', async () => {
    const { authenticity } = checker();
    const event = claim('spiffe://local/worker/alice', alice, 't6');
    const order: string[] = [];
    authenticity.acceptInOrder(claim('spiffe://local/worker/mallory', mallory, 't7'), 'a', () =>
      order.push('first'),
    );
    authenticity.acceptInOrder(event, 'b', () => order.push('second'));
    authenticity.acceptInOrder(structuredClone(event), 'c', () => order.push('copy'));
    await expect.poll(() => order.length).toBe(3);
    expect(order).toEqual(['first', 'second', 'copy']);
  });

  it('past its bound the check runs inline, still in arrival order and with the same verdicts', async () => {
    const { authenticity, warnings } = checker(1);
    const verdicts: string[] = [];
    authenticity.acceptInOrder(claim('spiffe://local/worker/alice', alice, 'b1'), 'a', (ok) =>
      verdicts.push(`b1 ${ok}`),
    );
    // One waits already: these are checked on the spot, and wait their turn.
    authenticity.acceptInOrder(claim('spiffe://local/worker/alice', mallory, 'b2'), 'a', (ok) =>
      verdicts.push(`b2 ${ok}`),
    );
    authenticity.acceptInOrder(claim('spiffe://local/worker/mallory', mallory, 'b3'), 'a', (ok) =>
      verdicts.push(`b3 ${ok}`),
    );
    expect(verdicts).toEqual([]);
    await expect.poll(() => verdicts.length).toBe(3);
    expect(verdicts).toEqual(['b1 true', 'b2 false', 'b3 true']);
    expect(warnings).toHaveLength(1);
  });

  it('checks inline while the coordinator says not to offload, in order with what is still in the pool', async () => {
    let offload = false;
    const { authenticity, warnings } = checker(undefined, () => offload);
    const verdicts: string[] = [];
    // Nothing waits and nothing is offloaded: decided before acceptInOrder returns.
    authenticity.acceptInOrder(claim('spiffe://local/worker/alice', mallory, 'o1'), 'a', (ok) =>
      verdicts.push(`o1 ${ok}`),
    );
    expect(verdicts).toEqual(['o1 false']);
    offload = true;
    authenticity.acceptInOrder(claim('spiffe://local/worker/alice', alice, 'o2'), 'a', (ok) =>
      verdicts.push(`o2 ${ok}`),
    );
    offload = false;
    // Checked on the spot, but it waits for the offloaded one before it.
    authenticity.acceptInOrder(claim('spiffe://local/worker/mallory', mallory, 'o3'), 'a', (ok) =>
      verdicts.push(`o3 ${ok}`),
    );
    expect(verdicts).toEqual(['o1 false']);
    await expect.poll(() => verdicts.length).toBe(3);
    expect(verdicts).toEqual(['o1 false', 'o2 true', 'o3 true']);
    expect(warnings).toHaveLength(1);
  });

  it('after close() nothing waiting is decided', async () => {
    const { authenticity } = checker();
    const verdicts: boolean[] = [];
    authenticity.acceptInOrder(claim('spiffe://local/worker/alice', alice, 't8'), 'a', (ok) =>
      verdicts.push(ok),
    );
    authenticity.close();
    authenticity.acceptInOrder(claim('spiffe://local/worker/alice', alice, 't9'), 'a', (ok) =>
      verdicts.push(ok),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(verdicts).toEqual([]);
  });
});

describe('EventAuthenticity.vouch (a subject only the key may publish on proves the sender)', () => {
  /** A claim signed with `key` whose signature bytes are then broken: only Ed25519 would notice. */
  const brokenSignature = (agentId: string, key: AgentKey, taskId: string): AmfEvent => {
    const event = claim(agentId, key, taskId) as AmfEvent & { amfsignature: string };
    const last = event.amfsignature.at(-2) === 'A' ? 'B' : 'A';
    event.amfsignature = `${event.amfsignature.slice(0, -2)}${last}${event.amfsignature.slice(-1)}`;
    return event;
  };

  it('takes a vouched event without checking its signature, still bound to the agent', async () => {
    const { authenticity, warnings } = checker();
    const unvouched = brokenSignature('spiffe://local/worker/alice', alice, 'v1');
    const vouched = brokenSignature('spiffe://local/worker/alice', alice, 'v2');
    authenticity.vouch(vouched, alice.publicKey);
    expect(authenticity.accept(vouched, 'task events')).toBe(true);
    expect(authenticity.accept(unvouched, 'amf.task.claim')).toBe(false);
    expect(warnings.map((w) => w.reason)).toEqual(['bad_signature']);
    // In order too, and with no Ed25519 check to wait for.
    const verdicts: boolean[] = [];
    const again = brokenSignature('spiffe://local/worker/alice', alice, 'v3');
    authenticity.vouch(again, alice.publicKey);
    authenticity.acceptInOrder(again, 'task events', (ok) => verdicts.push(ok));
    await expect.poll(() => verdicts).toEqual([true]);
  });

  it("does not vouch for an event naming another signer, nor take one vouched by another agent's key", () => {
    const { authenticity, warnings } = checker();
    // Signed (stated) by alice's key but vouched for by mallory's subject: not vouched, and the
    // broken signature is refused.
    const stated = brokenSignature('spiffe://local/worker/alice', alice, 'v4');
    authenticity.vouch(stated, mallory.publicKey);
    expect(authenticity.accept(stated, 'task events')).toBe(false);
    // An unsigned event in alice's name on mallory's subject: mallory's key is not alice's.
    const unsigned = claim('spiffe://local/worker/alice', alice, 'v5') as AmfEvent & Record<string, unknown>;
    delete unsigned.amfsignature;
    delete unsigned.amfsigner;
    authenticity.vouch(unsigned, mallory.publicKey);
    expect(authenticity.accept(unsigned, 'task events')).toBe(false);
    expect(warnings.map((w) => w.reason)).toEqual(['bad_signature', 'forged_event']);
  });
});
