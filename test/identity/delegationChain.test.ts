// Delegated authority in auth_context (#3a/#3b/#7): root-first chains ending with granted_by,
// issued_at/expires_at, no cycles, scopes a strict subset of the grantor's.
import { describe, expect, it } from 'vitest';
import { checkDelegation } from '../../src/identity/delegationChain.js';
import type { AuthContext } from '../../src/events/cloudEvent.js';

const NOW = Date.parse('2026-01-01T12:00:00Z');
const ROOT = 'spiffe://amf.test/coordinator';
const MID = 'spiffe://amf.test/worker/a';
const LEAF = 'spiffe://amf.test/worker/b';
const delegated = (extra: Partial<AuthContext> = {}): AuthContext => ({
  identity: LEAF,
  trust_domain: 'amf.test',
  granted_by: MID,
  delegation_chain: [ROOT, MID],
  scopes: ['claim:tasks'],
  issued_at: '2026-01-01T11:59:00Z',
  expires_at: '2026-01-01T12:05:00Z',
  ...extra,
});
const specialist = ['claim:tasks', 'call:mcp'];

describe('checkDelegation', () => {
  it('accepts self-issued authority and a well-formed delegation', () => {
    expect(
      checkDelegation(
        { identity: MID, trust_domain: 'amf.test', scopes: specialist },
        { grantorScopes: specialist, now: NOW },
      ),
    ).toEqual({ ok: true, delegated: false });
    expect(checkDelegation(delegated(), { grantorScopes: specialist, now: NOW })).toEqual({
      ok: true,
      delegated: true,
    });
  });

  it.each<[string, Partial<AuthContext>, string]>([
    ['self-issued with a chain', { granted_by: LEAF }, 'delegation_chain_invalid'],
    ['chain not ending with granted_by', { delegation_chain: [MID, ROOT] }, 'delegation_chain_invalid'],
    ['empty chain for a delegation', { delegation_chain: [] }, 'delegation_chain_invalid'],
    ['identity already in the chain', { delegation_chain: [LEAF, MID] }, 'delegation_cycle'],
    ['repeated link', { delegation_chain: [MID, ROOT, MID] }, 'delegation_cycle'],
    ['no expires_at', { expires_at: undefined as never }, 'delegation_chain_invalid'],
    ['expired', { expires_at: '2026-01-01T11:59:30Z' }, 'delegation_expired'],
    ['issued in the future', { issued_at: '2026-01-01T12:01:00Z' }, 'delegation_chain_invalid'],
    ['a scope the grantor lacks', { scopes: ['write:registry'] }, 'delegation_scope_escalation'],
    [
      'all of the grantor scopes (not a strict subset)',
      { scopes: ['claim:tasks', 'call:mcp'] },
      'delegation_scope_escalation',
    ],
  ])('refuses %s', (_name, extra, reason) => {
    const auth = delegated(extra);
    if (extra.expires_at === undefined && 'expires_at' in extra) delete auth.expires_at;
    expect(checkDelegation(auth, { grantorScopes: specialist, now: NOW })).toMatchObject({
      ok: false,
      reason,
    });
  });

  it('a coordinator grantor holds the whole vocabulary implicitly', () => {
    expect(
      checkDelegation(delegated({ scopes: ['write:registry'] }), { grantorScopes: 'all', now: NOW }),
    ).toMatchObject({ ok: true });
  });
});
