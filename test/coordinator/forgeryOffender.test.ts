// Who a forgery warning names (issue 29, Low): only a sender that is proven. A valid signature proves
// its key's agent; an unsigned event, or one whose signature fails, proves nothing, and the agent it
// names is its victim: the warning then names no agent and says the sender is unknown (a shared
// subject does not name the connection; per-agent subjects do, see artifactFlood.test.ts).
import { describe, expect, it } from 'vitest';
import { createEvent, type AmfEvent } from '../../src/events/cloudEvent.js';
import { createEphemeralAgentKey, type AgentKey } from '../../src/identity/agentKey.js';
import { SIGNATURE_ATTRIBUTE, SIGNER_ATTRIBUTE } from '../../src/identity/eventSignature.js';
import { EventAuthenticity } from '../../src/coordinator/tasks/eventAuthenticity.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';
import type { PolicyNotices } from '../../src/registry/policyNotices.js';
import { signElsewhere } from '../helpers/signElsewhere.js';

const VICTIM = 'spiffe://local/worker/victim';
const MALLORY = 'spiffe://local/worker/mallory';
const victimKey = createEphemeralAgentKey();
const malloryKey = createEphemeralAgentKey();

const registry = new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3 });
for (const [agentId, key] of [
  [VICTIM, victimKey],
  [MALLORY, malloryKey],
] as const)
  registry.admit({
    agent_id: agentId,
    endpoint: 'http://127.0.0.1:9',
    protocols_supported: ['A2A/1.0'],
    capability_tags: ['echo'],
    nkey: key.publicKey,
  });

function checker() {
  const warnings: Array<Record<string, unknown>> = [];
  const notices = { warn: (w: Record<string, unknown>) => warnings.push(w) } as unknown as PolicyNotices;
  return { authenticity: new EventAuthenticity({ registry, notices }), warnings };
}

/** Progress in the victim's name (what a forger sends), signed with `key` when given. */
function progressAsVictim(taskId: string, key?: AgentKey): AmfEvent {
  const event = createEvent({
    type: 'amf.task.progress',
    sender: { identity: VICTIM, source: 'http://127.0.0.1:1', role: 'specialist', trustDomain: 'local' },
    payload: { task_id: taskId, agent_id: VICTIM, message: 'forged' },
    taskId,
  });
  return key ? signElsewhere(event, key) : event;
}

describe('the offender of a refused forgery', () => {
  it('is nobody, never the victim, for an unsigned event in the victim’s name', () => {
    const { authenticity, warnings } = checker();
    expect(authenticity.accept(progressAsVictim('t-unsigned'), 'amf.task.progress')).toBe(false);
    expect(warnings).toHaveLength(1);
    const w = warnings[0]!;
    expect(w.reason).toBe('unsigned_event');
    expect(w.agent_id).toBeUndefined();
    expect(String(w.message)).toContain('sender unknown');
    expect((w.details as Record<string, unknown>).claimed_agent).toBe(VICTIM);
  });

  it('is nobody when the signature names the victim’s key but does not verify', () => {
    const { authenticity, warnings } = checker();
    const event = progressAsVictim('t-bad') as unknown as Record<string, unknown>;
    event[SIGNER_ATTRIBUTE] = victimKey.publicKey;
    event[SIGNATURE_ATTRIBUTE] = malloryKey.sign(Buffer.from('something else'));
    expect(authenticity.accept(event as unknown as AmfEvent, 'amf.task.progress')).toBe(false);
    expect(warnings[0]?.reason).toBe('bad_signature');
    expect(warnings[0]?.agent_id).toBeUndefined();
  });

  it('is the signer’s agent when a valid signature proves who sent it', () => {
    const { authenticity, warnings } = checker();
    expect(authenticity.accept(progressAsVictim('t-signed', malloryKey), 'amf.task.progress')).toBe(false);
    expect(warnings[0]?.reason).toBe('forged_event');
    expect(warnings[0]?.agent_id).toBe(MALLORY);
    expect(String(warnings[0]?.message)).not.toContain('sender unknown');
  });
});
