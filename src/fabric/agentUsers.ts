/**
 * NATS users of individual agents and of the join door (docs/security.md, "Inside the mesh"). Each
 * admitted agent connects as its own nkey user, whose permissions allow only what that agent needs:
 * pulling from the work consumers of the tags it was admitted for, publishing its own task events,
 * heartbeats and results, handing its artifacts and evidence to the coordinators on subjects named
 * after its key, and reading its own inbox, its own subjects (`amf.agent.<nkey>.>`: the follow-ups of
 * the tasks it holds), cancellations, policy notices and finals (the delegation client waits for its
 * children's). The join user may only publish advertisements: it is how an agent not yet admitted is
 * heard, and all it can be given is a judgement.
 *
 * Subjects named after the key are how the connection binds what an agent sends and what it may
 * read (DESIGN.md §3, per-agent subjects beside the seed's): nats-server lets only that key's user
 * use them, whatever the message says.
 */
import { workConsumerName } from '../events/subjects.js';
import { JOIN_USER, type RoleCredential } from './credentials.js';
import { WORK_STREAM } from './jetstream.js';
import { WORKER_DENIED_STATE, type RolePermissions } from './natsConfig.js';

/** One admitted agent as the NATS server knows it: its nkey and the tags it may take work of. */
export interface AgentUser {
  nkey: string;
  tags: readonly string[];
}

export { JOIN_USER };

/** Inbox prefix of an agent user: only its own inbox is readable to it. */
export function agentInboxPrefix(nkey: string): string {
  return `_INBOX.${nkey}`;
}

const NKEY_USER = /^U[A-Z2-7]{55}$/;

/** True when `nkey` is an nkey user public key (`U` + 55 base32 characters): safe as a subject token. */
export function isAgentNkey(nkey: unknown): nkey is string {
  return typeof nkey === 'string' && NKEY_USER.test(nkey);
}

function checkedKey(nkey: string): string {
  if (!isAgentNkey(nkey)) throw new Error(`invalid agent nkey ${JSON.stringify(nkey)}`);
  return nkey;
}

/** The subjects only the agent with this key may read: `amf.agent.<nkey>.>`. */
export function agentSubjects(nkey: string): string {
  return `amf.agent.${checkedKey(nkey)}.>`;
}

/**
 * Where a coordinator sends the follow-up input of a task this agent holds (`amf.task.input`):
 * readable by that agent alone, so a requester's answer ("my PIN is …") reaches no other agent.
 */
export function agentInputSubject(nkey: string): string {
  return `amf.agent.${checkedKey(nkey)}.input`;
}

/** What an agent hands to the coordinators to be published and kept (artifactIntake.ts). */
export type SubmissionKind = 'artifact' | 'evidence';

/** Prefixes of the submission subjects; the last token is the submitting agent's key. */
export const SUBMISSION_PREFIXES: Readonly<Record<SubmissionKind, string>> = Object.freeze({
  artifact: 'amf.internal.artifact.',
  evidence: 'amf.internal.evidence.',
});

/**
 * Where the agent with this key publishes an `amf.artifact.publish` (or `amf.evidence.publish`)
 * event: only its own NATS user may publish there, so the subject names the real sender, and a
 * coordinator checks the event and the agent's quota before publishing it on the seed's subject
 * (which the AMF_ARTIFACTS stream keeps). Internal, like a worker's final on its way to the
 * coordinator: it is not streamed to `/events` before it is checked.
 */
export function submissionSubject(kind: SubmissionKind, nkey: string): string {
  return `${SUBMISSION_PREFIXES[kind]}${checkedKey(nkey)}`;
}

/** The permissions of one admitted agent (pure: the tags decide the work consumers). */
export function agentPermissions(user: AgentUser): RolePermissions {
  const work = user.tags.flatMap((tag) => {
    const consumer = workConsumerName(tag);
    return [
      `$JS.API.CONSUMER.INFO.${WORK_STREAM}.${consumer}`,
      `$JS.API.CONSUMER.MSG.NEXT.${WORK_STREAM}.${consumer}`,
      `$JS.ACK.${WORK_STREAM}.${consumer}.>`,
    ];
  });
  return {
    publish: {
      allow: [
        'amf.task.claim',
        'amf.task.progress',
        'amf.task.blocked',
        'amf.task.delegate',
        'amf.result.partial',
        'amf.result.final',
        // Artifacts and evidence only on its own subjects: the coordinators check and keep them.
        submissionSubject('artifact', user.nkey),
        submissionSubject('evidence', user.nkey),
        'amf.discovery.agent.heartbeat',
        'amf.internal.reply.>',
        // Finals sent straight to the task's coordinator (request/reply), and their stored copies.
        'amf.internal.final.>',
        'amf.internal.result.>',
        ...work,
      ],
      deny: [...WORKER_DENIED_STATE],
    },
    subscribe: {
      allow: [
        'amf.task.cancel',
        // Its own subjects: the follow-ups of the tasks it holds (never another agent's).
        agentSubjects(user.nkey),
        'amf.policy.deny',
        'amf.policy.warning',
        'amf.result.final',
        `${agentInboxPrefix(user.nkey)}.>`,
      ],
      deny: ['amf.internal.>', '$JS.>', '$KV.>', '$O.>'],
    },
    allowResponses: { max: 1 },
  };
}

/** The join user: advertisements only, nothing to read. */
export const JOIN_PERMISSIONS: RolePermissions = Object.freeze({
  publish: Object.freeze({
    allow: Object.freeze(['amf.discovery.agent.heartbeat']),
    deny: Object.freeze([]),
  }),
  subscribe: Object.freeze({ allow: Object.freeze([]), deny: Object.freeze(['>']) }),
});

/** The users beyond the roles that a server config carries. */
export interface MeshUsers {
  join?: RoleCredential;
  agents?: readonly AgentUser[];
}
