/**
 * Whether a worker's `amf.task.delegate` may become a child task: payload checks, the claimant rule,
 * the non-overridable cycle guard (docs/decisions.md #7) and the OPA delegation decision (depth
 * limit). Returns a verdict; `delegate` then announces the child through the lifecycle or publishes
 * the deny.
 */
import { checkDelegatePayload, type DelegatePayload } from '../../events/payloads.js';
import { isCapabilityTag, isTaskId } from '../../events/subjects.js';
import { isTerminal } from '../../events/taskStateMachine.js';
import type { AmfEventOf, AuthContext } from '../../events/cloudEvent.js';
import { checkDelegation } from '../../identity/delegationChain.js';
import type { AnnounceRequest, LifecycleOptions, TaskNotices, TaskRecord } from './record.js';

export type DelegationVerdict =
  { ok: true; parent: TaskRecord } | { ok: false; reason: string; message: string };

export interface DelegationContext {
  isKnownTask(id: string): boolean;
  /** The parent, when it is in flight. */
  activeTask(id: string): TaskRecord | undefined;
  servesTag(tag: string): boolean;
  decideDelegation: LifecycleOptions['decideDelegation'];
  /** Scopes held by a grantor of delegated authority (default: the whole vocabulary). */
  grantorScopes?: (grantor: string | undefined) => readonly string[] | 'all';
}

const refuse = (reason: string, message: string): DelegationVerdict => ({
  ok: false,
  reason,
  message: `delegation refused: ${message}`,
});

/** Judges one delegation request; never throws. */
export async function judgeDelegation(
  p: DelegatePayload,
  ctx: DelegationContext,
  auth?: AuthContext,
): Promise<DelegationVerdict> {
  const problem = checkDelegatePayload(p);
  if (problem) return refuse('delegation_invalid', problem);
  // Authority delegated to the sender must be well-formed, unexpired and no wider than its grantor's
  // (docs/decisions.md #3b); a worker's grantor holds at most a specialist's scopes unless it is the
  // coordinator.
  if (auth) {
    const authority = checkDelegation(auth, { grantorScopes: ctx.grantorScopes?.(auth.granted_by) ?? 'all' });
    if (!authority.ok) return refuse(authority.reason, authority.message);
  }
  if (!isTaskId(p.child_task_id) || ctx.isKnownTask(p.child_task_id))
    return refuse('delegation_invalid', 'child_task_id must be a new id of [A-Za-z0-9-]{1,64}');
  if (!isCapabilityTag(p.required_capability))
    return refuse('delegation_invalid', `invalid capability tag "${p.required_capability}"`);
  const parent = ctx.activeTask(p.parent_task_id);
  if (!parent) return refuse('delegation_invalid', `parent task ${p.parent_task_id} is not in flight`);
  if (parent.claimedBy !== p.agent_id)
    return refuse('delegation_invalid', `${p.agent_id} has not claimed task ${p.parent_task_id}`);
  // docs/decisions.md #7: a cycle is refused whatever a policy says; this guard is the invariant, the
  // policy is where the depth limit (and the same cycle rule) are configured.
  if (parent.chain.includes(p.agent_id))
    return refuse('delegation_cycle', `${p.agent_id} already appears in the delegation chain`);
  let decision: { allow: boolean; reasons: string[]; max_depth: number };
  try {
    decision = await ctx.decideDelegation({ chain: parent.chain, delegator: p.agent_id });
  } catch (err) {
    return refuse('policy_unavailable', `policy evaluation failed: ${(err as Error).message}`);
  }
  if (!decision.allow) {
    const reason = decision.reasons[0] ?? 'delegation_denied';
    return refuse(
      reason,
      reason === 'delegation_depth_exceeded'
        ? `chain length ${parent.chain.length} reached the limit ${decision.max_depth}`
        : `by policy: ${decision.reasons.join(', ')}`,
    );
  }
  if (isTerminal(parent.state))
    return refuse('delegation_invalid', `parent task ${parent.taskId} ended meanwhile`);
  if (!ctx.servesTag(p.required_capability))
    return refuse('no_agent_for_tag', `no live agent serves capability "${p.required_capability}"`);
  return { ok: true, parent };
}

/**
 * A subject the delegator may name for its child's final: one under a NATS inbox (`_INBOX.`), with
 * no wildcard. NATS lets only the inbox's owner read it and no other agent publish into it; naming
 * another agent's inbox would only send it a final for a child id it does not wait for.
 */
function isInboxSubject(subject: unknown): subject is string {
  return typeof subject === 'string' && subject.length <= 256 && /^_INBOX(\.[A-Za-z0-9_-]+)+$/.test(subject);
}

export interface DelegationRunner extends DelegationContext {
  notices: TaskNotices;
  /** Announces the child task (the lifecycle's `announce`); throws when it cannot. */
  announce(req: AnnounceRequest): TaskRecord;
}

/** Child task for an accepted delegation, else a terminal deny for the proposed child id. */
export async function delegate(event: AmfEventOf<'amf.task.delegate'>, ctx: DelegationRunner): Promise<void> {
  const p = event.data.payload;
  const verdict = await judgeDelegation(p, ctx, event.data.auth_context);
  const deny = (reason: string, message: string) => {
    const childId = typeof p?.child_task_id === 'string' ? p.child_task_id : undefined;
    ctx.notices.deny(
      {
        reason,
        message,
        ...(childId && isTaskId(childId) ? { task_id: childId } : {}),
        terminal: true,
        state: 'failed',
        details: { parent_task_id: p?.parent_task_id, agent_id: p?.agent_id },
      },
      { ...(event.amftraceid ? { traceId: event.amftraceid } : {}) },
    );
  };
  if (!verdict.ok) return deny(verdict.reason, verdict.message);
  const parent = verdict.parent;
  try {
    ctx.announce({
      tag: p.required_capability,
      task: p.task,
      taskId: p.child_task_id,
      traceId: parent.traceId,
      parentTaskId: parent.taskId,
      chain: [...parent.chain, p.agent_id],
      withReplySubject: false,
      ...(p.input ? { input: p.input } : {}),
      ...(isInboxSubject(p.reply_inbox) ? { resultInbox: p.reply_inbox } : {}),
    });
  } catch (err) {
    deny('delegation_invalid', `delegation refused: ${(err as Error).message}`);
  }
}
