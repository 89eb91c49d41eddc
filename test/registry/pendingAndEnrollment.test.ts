// The registry's side of "mDNS never gives power": a pending listing binds and grants nothing and
// is replaced by a proven admission; approval enrolls the key (or ties a keyless agent to its
// address); enrolled keys get a NATS login until forgotten or, unused, past their deadline. Pure
// state with an injected clock.
import { describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { AgentRegistry, type RegistryChange } from '../../src/registry/agentRegistry.js';

const key = createEphemeralAgentKey().publicKey;
const other = createEphemeralAgentKey().publicKey;

function record(id: string, nkey?: string, tags = ['echo']): AgentRecord {
  return {
    agent_id: id,
    endpoint: 'http://10.0.0.5:8766',
    protocols_supported: ['A2A/1.0'],
    capability_tags: tags,
    ...(nkey ? { nkey } : {}),
  };
}

function registry(now = { t: 1_000_000 }) {
  const r = new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3, now: () => now.t });
  const changes: RegistryChange['kind'][] = [];
  r.onChange((c) => changes.push(c.kind));
  return { r, changes, now };
}

const heard = { source: '10.0.0.5', instance: 'x' };

describe('pending listings and enrolled keys', () => {
  it('a pending listing binds no key, grants nothing, and is replaced by the proven admission', () => {
    const { r, changes } = registry();
    r.listPending(record('a', key), { verified: true }, heard);
    expect(r.get('a')?.status).toBe('pending');
    expect(r.boundKey('a')).toBeUndefined();
    expect(r.grantedKeys().size).toBe(0);
    expect(r.servesTag('echo')).toBe(false);
    expect(r.markOffline('a', 'goodbye')).toBe(false);
    // The honest agent proves another key over NATS: it is admitted, not refused as a re-key.
    r.admit(record('a', other));
    expect(r.get('a')).toMatchObject({ status: 'live' });
    expect(r.boundKey('a')).toBe(other);
    expect(changes).toEqual(['pending', 'admitted']);
    // Hearsay never replaces proof.
    expect(r.listPending(record('a', key), { verified: true }, heard)).toBeUndefined();
    expect(r.get('a')?.record.nkey).toBe(other);
  });

  it('restoring a pending entry binds nothing', () => {
    const { r } = registry();
    r.restore({
      record: record('a', key),
      status: 'pending',
      admittedAt: '',
      lastSeen: 1,
      heartbeatSeconds: 5,
    });
    expect(r.boundKey('a')).toBeUndefined();
  });

  it('approval of a keyed listing enrolls and binds its key; it is offline until it proves itself', () => {
    const { r, changes } = registry();
    r.listPending(record('a', key), { verified: true }, heard);
    expect(() => r.approve('a', other)).toThrow(/now advertises key/);
    const { enrollment } = r.approve('a', key);
    expect(enrollment).toMatchObject({ nkey: key, agent_id: 'a', tags: ['echo'], via: 'approval' });
    expect(r.get('a')?.status).toBe('offline');
    expect(r.boundKey('a')).toBe(key);
    expect(r.grantedKeys().get(key)).toEqual({ agentId: 'a', tags: ['echo'] });
    expect(() => r.approve('a')).toThrow(/only a pending agent is approved/);
    r.admit(record('a', key));
    expect(r.isLive('a')).toBe(true);
    expect(changes).toEqual(['pending', 'approved', 'online']);
  });

  it('approval of a keyless listing makes it live, tied to where it was heard', () => {
    const { r } = registry();
    r.listPending(record('k'), { verified: true }, heard);
    r.approve('k', '');
    expect(r.isLive('k')).toBe(true);
    expect(r.keylessApproval('k')).toMatchObject({ source: '10.0.0.5' });
    expect(r.grantedKeys().size).toBe(0);
  });

  it('an enrollment with a deadline expires unused, and lasts once its agent was admitted', () => {
    const now = { t: 1_000_000 };
    const { r } = registry(now);
    r.enroll({ nkey: key, tags: ['echo'], via: 'invite', expiresAt: now.t + 60_000 });
    r.enroll({ nkey: other, tags: [], via: 'invite', expiresAt: now.t + 60_000 });
    expect([...r.grantedKeys().keys()].sort()).toEqual([key, other].sort());
    r.admit(record('b', key));
    expect(r.enrollment(key)).toMatchObject({ agent_id: 'b' });
    expect(r.enrollment(key)?.expires_at).toBeUndefined();
    now.t += 61_000;
    r.sweep();
    expect(r.enrollment(other)).toBeUndefined();
    expect(r.enrollment(key)).toBeDefined();
  });

  it('forget unbinds the key and drops its enrollment, live or not; a bound id refuses another key', () => {
    const { r } = registry();
    r.enroll({ nkey: key, agentId: 'a', tags: ['echo'], via: 'invite' });
    expect(() => r.enroll({ nkey: other, agentId: 'a', tags: [], via: 'approval' })).toThrow(/bound to key/);
    r.admit(record('a', key));
    expect(r.isLive('a')).toBe(true);
    r.forget('a');
    expect(r.get('a')).toBeUndefined();
    expect(r.boundKey('a')).toBeUndefined();
    expect(r.enrollment(key)).toBeUndefined();
    expect(r.grantedKeys().size).toBe(0);
  });
});
