/**
 * NATS users of individual agents and of the join door (docs/security.md, "Inside the mesh"). Each
 * admitted agent connects as its own nkey user, whose permissions allow only what that agent needs:
 * pulling from the work consumers of the tags it was admitted for, publishing heartbeats, handing its
 * task events, stored results, artifacts and evidence to the coordinators on subjects named after
 * its key (never on the shared subjects that streams record), and reading its own inbox, its own subjects (`amf.agent.<nkey>.>`: the follow-ups of
 * the tasks it holds), cancellations, policy notices and finals (the delegation client waits for its
 * children's). The join user may only publish advertisements: it is how an agent not yet admitted is
 * heard, and all it can be given is a judgement.
 *
 * Subjects named after the key are how the connection binds what an agent sends and what it may
 * read (DESIGN.md §3, per-agent subjects beside the seed's): nats-server lets only that key's user
 * use them, whatever the message says.
 */
import { isTaskId, SUBJECT_FINAL_PREFIX, workConsumerName } from '../events/subjects.js';
import { JOIN_USER, type RoleCredential } from './credentials.js';
import { WORK_STREAM } from './jetstream.js';
import { WORKER_DENIED_STATE, type RolePermissions } from './natsServer/config.js';
import { AmfError } from '../errors.js';

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
  if (!isAgentNkey(nkey)) throw new AmfError('INVALID_REQUEST', `invalid agent nkey ${JSON.stringify(nkey)}`);
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

/** Prefix of an agent's task-event subjects: `amf.internal.task.<nkey>.<route>`. */
export const TASK_EVENT_PREFIX = 'amf.internal.task.';

/**
 * How a task event is recorded: `mesh` = a task a coordinator announced (the task's own coordinator
 * records it, on the shared subject and the task's reply subject); `direct` = a task a caller sent
 * straight to the agent (one coordinator of the queue group records it on the shared subject).
 */
export type TaskEventRoute = 'mesh' | 'direct';

/**
 * Where the agent with this key hands its claims, progress, blocked notices, delegations, partials
 * and direct finals to the coordinators (coordinator/tasks/eventIntake.ts): only its own NATS user
 * may publish there, so the subject names the real sender; a coordinator checks the event and the
 * agent's quota before it records it on the shared subject (`amf.task.*`, `amf.result.*`).
 */
export function taskEventSubject(nkey: string, route: TaskEventRoute): string {
  return `${TASK_EVENT_PREFIX}${checkedKey(nkey)}.${route}`;
}

/** Prefix of stored results (AMF_RESULTS); an agent's own are `amf.internal.result.<nkey>.<task_id>`. */
export const RESULT_STORE_PREFIX = 'amf.internal.result.';

/**
 * Where the agent with this key stores a mesh task's final when its coordinator did not answer
 * (AMF_RESULTS): only its own user may publish there, so the coordinators attribute, bound and
 * check stored results by the subject's key, and AMF_RESULTS refuses (never evicts) once full.
 */
export function agentResultSubject(nkey: string, taskId: string): string {
  if (!isTaskId(taskId)) throw new AmfError('INVALID_REQUEST', `invalid task id ${JSON.stringify(taskId)}`);
  return `${RESULT_STORE_PREFIX}${checkedKey(nkey)}.${taskId}`;
}

/**
 * Where the agent with this key sends a mesh task's final straight to its coordinator (request/reply,
 * `amf.internal.final.<nkey>.<task_id>`): only its own user may publish there, so the subject proves
 * the sender and the coordinator need not check the final's signature
 * (coordinator/tasks/resultIntake.ts). The seed's form, `amf.internal.final.<task_id>`, stays for
 * agents without their own user.
 */
export function agentFinalSubject(nkey: string, taskId: string): string {
  if (!isTaskId(taskId)) throw new AmfError('INVALID_REQUEST', `invalid task id ${JSON.stringify(taskId)}`);
  return `${SUBJECT_FINAL_PREFIX}${checkedKey(nkey)}.${taskId}`;
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
        // Task events, stored results, artifacts and evidence only on its own subjects: the
        // coordinators check, bound and record them. Never the shared `amf.task.*`, `amf.result.*`
        // or reply subjects, which streams record and requesters read as they arrive.
        `${TASK_EVENT_PREFIX}${checkedKey(user.nkey)}.*`,
        `${RESULT_STORE_PREFIX}${user.nkey}.*`,
        submissionSubject('artifact', user.nkey),
        submissionSubject('evidence', user.nkey),
        'amf.discovery.agent.heartbeat',
        // Finals sent straight to the task's coordinator (request/reply), on its own subject.
        `${SUBJECT_FINAL_PREFIX}${checkedKey(user.nkey)}.*`,
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
