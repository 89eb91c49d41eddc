// Short agent names (kubectl's short names): the last id segment or the advertised display name
// stands for the id when one agent has it; several are listed; a full id is taken as it is.
import { describe, expect, it } from 'vitest';
import { AmfError } from '../../src/errors.js';
import {
  agentIdForName,
  resolveAgentName,
  shortAgentName,
  type AgentNameSource,
} from '../../src/registry/agentNames.js';
import type { RegisteredAgent } from '../../src/registry/agentRegistry.js';

function registry(ids: Array<string | [string, string]>, bound: string[] = []): AgentNameSource {
  const agents = ids.map((entry) => {
    const [id, display] = typeof entry === 'string' ? [entry, undefined] : entry;
    return {
      record: {
        agent_id: id,
        endpoint: 'http://127.0.0.1:1',
        protocols_supported: [],
        ...(display ? { display_name: display } : {}),
      },
      status: 'live',
    } as unknown as RegisteredAgent;
  });
  return {
    get: (id) => agents.find((a) => a.record.agent_id === id),
    list: () => agents,
    boundKey: (id) => (bound.includes(id) ? 'UKEY' : undefined),
  };
}

describe('shortAgentName', () => {
  it('is the last path segment, or the whole id without one', () => {
    expect(shortAgentName('spiffe://local/worker/summarizer')).toBe('summarizer');
    expect(shortAgentName('did:web:example.com')).toBe('did:web:example.com');
    expect(shortAgentName('spiffe://local/worker/')).toBe('spiffe://local/worker/');
  });
});

describe('resolveAgentName', () => {
  const reg = registry([
    'spiffe://local/worker/summarizer',
    'spiffe://local/worker/echo',
    'spiffe://lab/worker/echo',
    ['spiffe://local/afm/tutor-1', 'math-tutor'],
  ]);

  it('takes a known full id as it is', () => {
    expect(resolveAgentName(reg, 'spiffe://lab/worker/echo')).toEqual({
      kind: 'id',
      agentId: 'spiffe://lab/worker/echo',
    });
  });

  it('resolves a unique short name or display name', () => {
    expect(resolveAgentName(reg, 'summarizer')).toEqual({
      kind: 'id',
      agentId: 'spiffe://local/worker/summarizer',
    });
    expect(resolveAgentName(reg, 'math-tutor')).toEqual({
      kind: 'id',
      agentId: 'spiffe://local/afm/tutor-1',
    });
  });

  it('lists every candidate of a shared name, sorted', () => {
    expect(resolveAgentName(reg, 'echo')).toEqual({
      kind: 'ambiguous',
      name: 'echo',
      candidates: ['spiffe://lab/worker/echo', 'spiffe://local/worker/echo'],
    });
  });

  it('says unknown for a name nobody has, and keeps an id bound to a key but no longer listed', () => {
    expect(resolveAgentName(reg, 'nobody')).toEqual({ kind: 'unknown', name: 'nobody' });
    const gone = registry([], ['spiffe://local/worker/gone']);
    expect(resolveAgentName(gone, 'spiffe://local/worker/gone')).toEqual({
      kind: 'id',
      agentId: 'spiffe://local/worker/gone',
    });
  });
});

describe('agentIdForName', () => {
  it('returns the id, or the name when unknown, and refuses an ambiguous name with its candidates', () => {
    const reg = registry(['spiffe://a/worker/echo', 'spiffe://b/worker/echo', 'spiffe://a/worker/calc']);
    expect(agentIdForName(reg, 'calc')).toBe('spiffe://a/worker/calc');
    expect(agentIdForName(reg, 'nobody')).toBe('nobody');
    let caught: unknown;
    try {
      agentIdForName(reg, 'echo');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(AmfError);
    expect((caught as AmfError).code).toBe('INVALID_REQUEST');
    expect((caught as AmfError).message).toBe(
      '"echo" names 2 agents (spiffe://a/worker/echo, spiffe://b/worker/echo): give the full agent id',
    );
    expect((caught as AmfError).details).toEqual({
      candidates: ['spiffe://a/worker/echo', 'spiffe://b/worker/echo'],
    });
  });
});
