// The registry's key bindings (issue 12): an agent id keeps the key of its first admission through
// offline spells, removal and eviction, refuses records with another key, and is unbound only by
// forget. Pure state with an injected clock.
import { describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';

const record = (id: string, nkey?: string): AgentRecord => ({
  agent_id: id,
  endpoint: `http://127.0.0.1:9/${id}`,
  protocols_supported: ['A2A/1.0'],
  capability_tags: ['t'],
  ...(nkey !== undefined ? { nkey } : {}),
});

describe('agent key bindings', () => {
  it('keep the first key through offline, removal and eviction; only forget unbinds', () => {
    let now = 0;
    const registry = new AgentRegistry({
      defaultHeartbeatSeconds: 1,
      offlineAfterMissed: 1,
      maxAgents: 2,
      now: () => now,
    });
    expect(registry.admit(record('a', 'UKEYA'))?.kind).toBe('admitted');
    expect(registry.boundKey('a')).toBe('UKEYA');
    registry.markOffline('a', 'goodbye');
    // Another key, or none, is not this agent: the registry keeps the bound record.
    expect(registry.admit(record('a', 'UKEYB'))).toBeUndefined();
    expect(registry.admit(record('a'))).toBeUndefined();
    expect(registry.get('a')?.record.nkey).toBe('UKEYA');
    expect(registry.get('a')?.status).toBe('offline');
    // The same key brings it back.
    expect(registry.admit(record('a', 'UKEYA'))?.kind).toBe('online');

    registry.remove('a', 'readvertisement_denied');
    expect(registry.get('a')).toBeUndefined();
    expect(registry.boundKey('a')).toBe('UKEYA');
    expect(registry.admit(record('a', 'UKEYB'))).toBeUndefined();

    // Evicted for room (the list holds two): still bound.
    registry.admit(record('b', 'UKEYB2'));
    registry.markOffline('b', 'goodbye');
    now += 10;
    registry.admit(record('c', 'UKEYC'));
    registry.admit(record('d', 'UKEYD'));
    expect(registry.get('b')).toBeUndefined();
    expect(registry.boundKey('b')).toBe('UKEYB2');

    registry.forget('a');
    expect(registry.boundKey('a')).toBeUndefined();
    registry.forget('c');
    expect(registry.admit(record('a', 'UKEYB'))?.kind).toBe('admitted');
    expect(registry.boundKey('a')).toBe('UKEYB');
  });

  it('a keyless agent is not bound until it is admitted with a key; restore binds', () => {
    const registry = new AgentRegistry({ defaultHeartbeatSeconds: 1, offlineAfterMissed: 1 });
    registry.admit(record('k'));
    expect(registry.boundKey('k')).toBeUndefined();
    expect(registry.admit(record('k', 'UKEYK'))?.kind).toBe('changed');
    expect(registry.boundKey('k')).toBe('UKEYK');

    const other = new AgentRegistry({ defaultHeartbeatSeconds: 1, offlineAfterMissed: 1 });
    other.restore({ ...registry.get('k')!, status: 'offline' });
    expect(other.boundKey('k')).toBe('UKEYK');
    expect(other.admit(record('k', 'UKEYX'))).toBeUndefined();
  });
});
