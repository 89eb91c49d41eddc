/**
 * Bare names and the federated resource and prompt catalogs, as pure functions: first come first
 * served, a collision rejects the bare name for every claimant for good, namespaced names always
 * resolve, and templates route instantiated URIs.
 */
import { describe, expect, it } from 'vitest';
import { BareNames, type BareCollision } from '../../src/protocols/mcp/federation/bareNames.js';
import { ResourceCatalog, type FederationEntry } from '../../src/protocols/mcp/federation/resources.js';
import { PromptCatalog } from '../../src/protocols/mcp/federation/prompts.js';
import { matchUriTemplate } from '../../src/protocols/mcp/uriTemplate.js';

function entry(agentId: string, prefix: string, uris: string[], prompts: string[] = []): FederationEntry {
  return {
    agentId,
    prefix,
    catalog: {
      capabilities: { resources: {}, prompts: {} },
      tools: [],
      resources: uris.map((uri) => ({ uri, name: uri })),
      templates: [{ uriTemplate: 'test://template/{id}/data', name: 't' }],
      prompts: prompts.map((name) => ({ name })),
    },
  };
}

describe('bare names', () => {
  it('grants the first claimant and rejects a contested name for every claimant, for good', () => {
    const bare = new BareNames();
    const collisions: BareCollision[] = [];
    expect(bare.claim('tool', 'search', 'a', collisions)).toBe(true);
    expect(bare.claim('tool', 'search', 'a', collisions)).toBe(true);
    expect(bare.claim('prompt', 'search', 'b', collisions)).toBe(true);
    expect(collisions).toEqual([]);
    expect(bare.claim('tool', 'search', 'b', collisions)).toBe(false);
    expect(bare.claim('tool', 'search', 'a', collisions)).toBe(false);
    expect(collisions).toEqual([{ kind: 'tool', name: 'search', agents: ['a', 'b'] }]);
    // Reported once.
    bare.claim('tool', 'search', 'c', collisions);
    expect(collisions).toHaveLength(1);
  });

  it('lists granted resources under their own URIs and contested ones namespaced; both resolve', () => {
    const bare = new BareNames();
    const collisions: BareCollision[] = [];
    const catalog = new ResourceCatalog(
      [
        entry('spiffe://x/a', 'a', ['test://one', 'test://shared']),
        entry('spiffe://x/b', 'b', ['test://shared']),
      ],
      bare,
      collisions,
    );
    const uris = catalog.list().map((r) => r.uri);
    // The first build granted test://shared to a before b claimed it: rebuilt, it is namespaced for both.
    const rebuilt = new ResourceCatalog(
      [
        entry('spiffe://x/a', 'a', ['test://one', 'test://shared']),
        entry('spiffe://x/b', 'b', ['test://shared']),
      ],
      bare,
      collisions,
    );
    expect(uris).toContain('test://one');
    expect(rebuilt.list().map((r) => r.uri)).toEqual([
      'test://one',
      'amf://a/test://shared',
      'amf://b/test://shared',
    ]);
    expect(rebuilt.resolve('test://shared')).toBeUndefined();
    expect(rebuilt.resolve('amf://b/test://shared')).toEqual({
      agentId: 'spiffe://x/b',
      uri: 'test://shared',
    });
    expect(rebuilt.resolve('test://one')).toEqual({ agentId: 'spiffe://x/a', uri: 'test://one' });
    // The template is claimed by both agents too: only namespaced instantiations resolve.
    expect(rebuilt.resolve('test://template/5/data')).toBeUndefined();
    expect(rebuilt.resolve('amf://a/test://template/5/data')).toEqual({
      agentId: 'spiffe://x/a',
      uri: 'test://template/5/data',
    });
    expect(collisions.map((c) => `${c.kind}:${c.name}`).sort()).toEqual([
      'resource:test://shared',
      'template:test://template/{id}/data',
    ]);
  });

  it('without bare names everything is namespaced and unknown prefixes do not resolve', () => {
    const prompts = new PromptCatalog([entry('spiffe://x/a', 'a', [], ['greet'])], undefined, []);
    expect(prompts.list().map((p) => p.name)).toEqual(['a__greet']);
    expect(prompts.resolve('a__greet')).toEqual({ agentId: 'spiffe://x/a', name: 'greet' });
    expect(prompts.resolve('greet')).toBeUndefined();
    const resources = new ResourceCatalog([entry('spiffe://x/a', 'a', ['test://one'])], undefined, []);
    expect(resources.resolve('amf://zz/test://one')).toBeUndefined();
    expect(resources.resolve('test://one')).toBeUndefined();
  });

  it('matches URI templates segment by segment', () => {
    expect(matchUriTemplate('test://template/{id}/data', 'test://template/123/data')).toEqual({ id: '123' });
    expect(matchUriTemplate('test://template/{id}/data', 'test://template/1/2/data')).toBeUndefined();
    expect(matchUriTemplate('doc://{a}.{b}', 'doc://x.y')).toEqual({ a: 'x', b: 'y' });
    expect(matchUriTemplate('doc://{a}', 'doc://%41')).toEqual({ a: 'A' });
  });
});
