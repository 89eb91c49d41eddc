/**
 * Delegated authority in an event's `auth_context` (v0.2 fields, docs/decisions.md #3a/#3b/#7): who granted
 * the scopes (`granted_by`), through whom (`delegation_chain`, root first, ending with the grantor),
 * when (`issued_at`) and until when (`expires_at`). Self-issued authority has `granted_by` equal to
 * `identity` (or absent) and an empty chain. Delegated scopes must be a strict subset of what the
 * grantor holds; a coordinator holds the whole vocabulary implicitly.
 */
import type { AuthContext } from '../events/cloudEvent.js';

/** The scope vocabulary (notes/amf.md section 3): what a coordinator implicitly holds. */
export const SCOPE_VOCABULARY: readonly string[] = Object.freeze([
  'dispatch:tasks',
  'claim:tasks',
  'read:registry',
  'write:registry',
  'call:mcp',
  'ingest:raw',
  'classify',
]);

/** Longest chain looked at (the policy's depth limit is far lower). */
const MAX_CHAIN = 32;
/** Clock skew allowed on `issued_at`. */
const SKEW_MS = 5_000;

/** What the grantor holds, as far as the verifier knows. */
export interface DelegationCheckOptions {
  /** Effective scopes of `granted_by` (`'all'` for a coordinator). */
  grantorScopes: readonly string[] | 'all';
  now?: number;
}

/** Why delegated authority was refused (deny reasons). */
export type DelegationRefusal =
  'delegation_chain_invalid' | 'delegation_cycle' | 'delegation_expired' | 'delegation_scope_escalation';

export type DelegationCheck =
  { ok: true; delegated: boolean } | { ok: false; reason: DelegationRefusal; message: string };

const refuse = (reason: DelegationRefusal, message: string): DelegationCheck => ({
  ok: false,
  reason,
  message,
});

function time(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const t = Date.parse(value);
  return Number.isFinite(t) ? t : NaN;
}

/** Checks the delegation fields of one auth_context; never throws. */
export function checkDelegation(auth: AuthContext, options: DelegationCheckOptions): DelegationCheck {
  const chain = auth.delegation_chain ?? [];
  const grantor = auth.granted_by ?? auth.identity;
  if (
    !Array.isArray(chain) ||
    chain.length > MAX_CHAIN ||
    !chain.every((id) => typeof id === 'string' && id !== '')
  )
    return refuse('delegation_chain_invalid', `delegation_chain must be at most ${MAX_CHAIN} identities`);
  if (grantor === auth.identity) {
    if (chain.length > 0)
      return refuse(
        'delegation_chain_invalid',
        'self-issued authority (granted_by = identity) has an empty chain',
      );
    return { ok: true, delegated: false };
  }
  // Root first: the last link is whoever granted this identity its authority.
  if (chain.length === 0 || chain[chain.length - 1] !== grantor)
    return refuse('delegation_chain_invalid', 'delegation_chain must be root-first and end with granted_by');
  if (new Set(chain).size !== chain.length || chain.includes(auth.identity))
    return refuse('delegation_cycle', 'an identity appears twice in the delegation chain');
  const issued = time(auth.issued_at);
  const expires = time(auth.expires_at);
  if (issued === undefined || expires === undefined || Number.isNaN(issued) || Number.isNaN(expires))
    return refuse('delegation_chain_invalid', 'delegated authority needs issued_at and expires_at');
  const now = options.now ?? Date.now();
  if (expires <= issued) return refuse('delegation_chain_invalid', 'expires_at is not after issued_at');
  if (issued > now + SKEW_MS) return refuse('delegation_chain_invalid', 'issued_at is in the future');
  if (expires <= now) return refuse('delegation_expired', `the delegation expired at ${auth.expires_at}`);
  const held = options.grantorScopes === 'all' ? SCOPE_VOCABULARY : options.grantorScopes;
  const scopes = auth.scopes ?? [];
  const escalated = scopes.filter((s) => !held.includes(s));
  if (escalated.length > 0)
    return refuse('delegation_scope_escalation', `${grantor} does not hold ${escalated.join(', ')}`);
  if (new Set(scopes).size >= new Set(held).size)
    return refuse(
      'delegation_scope_escalation',
      'delegated scopes must be a strict subset of the grantor\u2019s',
    );
  return { ok: true, delegated: true };
}
