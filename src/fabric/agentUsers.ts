/**
 * NATS users of individual agents and of the join door (docs/security.md, "Inside the mesh"). Each
 * admitted agent connects as its own nkey user, whose permissions allow only what that agent needs:
 * pulling from the work consumers of the tags it was admitted for, publishing its own task events,
 * heartbeats and results, and reading its own inbox, cancellations, policy notices and finals (the
 * delegation client waits for its children's). The join user may only publish advertisements: it is
 * how an agent not yet admitted is heard, and all it can be given is a judgement.
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
        'amf.artifact.>',
        'amf.evidence.>',
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
        'amf.task.input',
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
