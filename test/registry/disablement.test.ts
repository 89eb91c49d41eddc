// Disabled agents in the registry (registry/disablements.ts): a disabled agent stays live and keeps
// its NATS login, but its tags are not served and work offers of them name it; the state outlives the
// agent going offline and coming back, is lifted by enable or forget, and a pending agent cannot be
// disabled. Listeners hear local and stored changes apart. Pure state with an injected clock.
import { describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { AgentRegistry, type DisablementChange } from '../../src/registry/agentRegistry.js';
import { isDisablement } from '../../src/registry/disablements.js';

const record = (id: string, tags: string[], nkey?: string): AgentRecord => ({
  agent_id: id,
  endpoint: `http://127.0.0.1:9/${id}`,
  protocols_supported: ['A2A/1.0'],
  capability_tags: tags,
  ...(nkey !== undefined ? { nkey } : {}),
});

describe('disabling an agent in the registry', () => {
  it('withholds its tags, keeps it live and logged in, and lasts until enabled', () => {
    const registry = new AgentRegistry({
      defaultHeartbeatSeconds: 1,
      offlineAfterMissed: 1,
      now: () => 1000,
    });
    const changes: DisablementChange[] = [];
    registry.onDisablement((c) => changes.push(c));
    registry.admit(record('a', ['t', 'u'], 'UKEYA'));
    registry.admit(record('b', ['t']));
    expect(registry.liveTags().get('t')).toBe(2);

    const d = registry.disable('a', 'operator', '127.0.0.1');
    expect(d).toEqual({
      agent_id: 'a',
      by: 'operator',
      from: '127.0.0.1',
      disabled_at: new Date(1000).toISOString(),
    });
    expect(isDisablement(d)).toBe(true);
    expect(registry.isDisabled('a')).toBe(true);
    expect(registry.liveTags().get('t')).toBe(1);
    expect(registry.servesTag('u')).toBe(false);
    expect(registry.disabledFor('t')).toEqual(['a']);
    expect(registry.disabledFor('x')).toEqual([]);
    // Still live and still given its NATS user: it finishes what it holds.
    expect(registry.isLive('a')).toBe(true);
    expect(registry.grantedKeys().get('UKEYA')?.agentId).toBe('a');
    // A second disable keeps the first record and tells nobody.
    expect(registry.disable('a', 'operator', '10.0.0.9')).toBe(d);
    expect(changes.map((c) => `${c.kind}:${c.origin}`)).toEqual(['disabled:local']);

    // Offline and back: still disabled.
    registry.markOffline('a', 'goodbye');
    registry.admit(record('a', ['t', 'u'], 'UKEYA'));
    expect(registry.isDisabled('a')).toBe(true);
    expect(registry.servesTag('u')).toBe(false);

    expect(registry.enable('a')).toBe(d);
    expect(registry.enable('a')).toBeUndefined();
    expect(registry.servesTag('u')).toBe(true);
    expect(changes.map((c) => `${c.kind}:${c.origin}`)).toEqual(['disabled:local', 'enabled:local']);
  });

  it('refuses unknown and pending agents; forget lifts it; stored changes are told as such', () => {
    const registry = new AgentRegistry({ defaultHeartbeatSeconds: 1, offlineAfterMissed: 1 });
    const changes: DisablementChange[] = [];
    registry.onDisablement((c) => changes.push(c));
    expect(() => registry.disable('nobody', 'operator')).toThrow(/no agent nobody is known/);
    registry.listPending(record('p', ['t'], 'UKEYP'), { verified: true }, { source: '192.0.2.1' });
    expect(() => registry.disable('p', 'operator')).toThrow(/pending/);

    registry.admit(record('a', ['t'], 'UKEYA'));
    registry.disable('a', 'operator');
    registry.forget('a');
    expect(registry.isDisabled('a')).toBe(false);
    expect(changes.at(-1)).toMatchObject({ kind: 'enabled', agentId: 'a', origin: 'local' });

    // What another coordinator stored: taken once, then lifted when its key is deleted.
    const stored = { agent_id: 'c', by: 'operator', disabled_at: new Date(0).toISOString() };
    registry.restoreDisablement(stored);
    registry.restoreDisablement(stored);
    expect(registry.isDisabled('c')).toBe(true);
    registry.dropDisablement('c');
    expect(registry.isDisabled('c')).toBe(false);
    expect(changes.slice(-2).map((c) => `${c.kind}:${c.origin}`)).toEqual([
      'disabled:store',
      'enabled:store',
    ]);
  });

  it('reads back only well-formed records', () => {
    expect(isDisablement({ agent_id: 'a', by: 'operator', disabled_at: '2026-01-01T00:00:00Z' })).toBe(true);
    expect(isDisablement({ agent_id: '', by: 'operator', disabled_at: '2026-01-01T00:00:00Z' })).toBe(false);
    expect(isDisablement({ agent_id: 'a', by: 'operator', disabled_at: 'yesterday' })).toBe(false);
    expect(isDisablement({ agent_id: 'a', by: 'x'.repeat(201), disabled_at: '2026-01-01T00:00:00Z' })).toBe(
      false,
    );
    expect(isDisablement(null)).toBe(false);
  });
});
