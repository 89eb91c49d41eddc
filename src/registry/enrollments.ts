/**
 * Enrolled keys: the keys that may join the mesh without the data dir's join credential, because an
 * operator let them in — by approving a pending agent (`amf agents approve`) or by an invite that an
 * agent on another machine redeemed (`amf invite`). An enrolled key gets its own NATS user at once
 * (coordinator/agentGrants.ts), so it can connect and send its signed heartbeat: the agent becomes
 * `live` only with that proven, fresh heartbeat, judged like any other advertisement.
 */
import { isNkeyUser } from '../identity/nkeyPublic.js';
import { CAPABILITY_TAG_PATTERN } from '../events/subjects.js';

/** How a key came to be enrolled. */
export type EnrollmentVia = 'invite' | 'approval';

/** One enrolled key, as it is kept (and stored in the `amf_enrollments` bucket, keyed by the nkey). */
export interface Enrollment {
  /** The agent's nkey (user public key, `U…`). */
  nkey: string;
  /** The agent id the key is bound to; absent for an invite that named none (bound at admission). */
  agent_id?: string;
  /**
   * The tags the key was let in for: its NATS user pulls their work until the agent is live, and it
   * may advertise no other. Empty for an invite: not scoped (its user pulls nothing until live).
   */
  tags: string[];
  via: EnrollmentVia;
  enrolled_at: string;
  /**
   * Until when the key may first be used; gone once its agent was admitted (the enrollment then
   * lasts until the operator forgets the agent). Absent: no deadline.
   */
  expires_at?: string;
  /** The invite it came from (`via: 'invite'`). */
  invite_id?: string;
}

/** What an enrollment needs (see Coordinator.enrollKey); the rest is filled in. */
export interface EnrollmentRequest {
  nkey: string;
  agentId?: string;
  tags: readonly string[];
  via: EnrollmentVia;
  /** Epoch ms or a Date: until when the key may first be used. */
  expiresAt?: number | Date;
  inviteId?: string;
}

/** Checks a request and builds the enrollment; throws a TypeError saying what is wrong. */
export function enrollmentOf(request: EnrollmentRequest, now: number): Enrollment {
  if (!isNkeyUser(request.nkey))
    throw new TypeError(`"${String(request.nkey).slice(0, 60)}" is not an nkey user public key`);
  const tags = [...new Set(request.tags)];
  const bad = tags.find((t) => !CAPABILITY_TAG_PATTERN.test(t));
  if (bad !== undefined)
    throw new TypeError(`capability tag "${String(bad).slice(0, 40)}" does not match [a-z0-9-]+`);
  const enrollment: Enrollment = {
    nkey: request.nkey,
    tags,
    via: request.via,
    enrolled_at: new Date(now).toISOString(),
  };
  if (request.agentId !== undefined) enrollment.agent_id = request.agentId;
  if (request.expiresAt !== undefined) enrollment.expires_at = new Date(request.expiresAt).toISOString();
  if (request.inviteId !== undefined) enrollment.invite_id = request.inviteId;
  return enrollment;
}

/** True when `value` has the shape of a stored enrollment (read back from KV, where anything may be). */
export function isEnrollment(value: unknown): value is Enrollment {
  if (typeof value !== 'object' || value === null) return false;
  const e = value as Record<string, unknown>;
  return (
    typeof e.nkey === 'string' &&
    isNkeyUser(e.nkey) &&
    Array.isArray(e.tags) &&
    e.tags.every((t) => typeof t === 'string' && CAPABILITY_TAG_PATTERN.test(t)) &&
    (e.via === 'invite' || e.via === 'approval') &&
    typeof e.enrolled_at === 'string' &&
    (e.agent_id === undefined || typeof e.agent_id === 'string') &&
    (e.expires_at === undefined || typeof e.expires_at === 'string') &&
    (e.invite_id === undefined || typeof e.invite_id === 'string')
  );
}

/** True when the enrollment's deadline for first use has passed. */
export function enrollmentExpired(e: Enrollment, now: number): boolean {
  return e.expires_at !== undefined && Date.parse(e.expires_at) <= now;
}
