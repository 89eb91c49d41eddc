/**
 * JSON schemas of the bodies of AMF's own routes (the protocols' are beside their adapters):
 * approving an agent, minting and redeeming an invite, and a task sent straight to a worker. The
 * schemas check structure and bounds; what needs a key's checksum, a token's signature or the
 * worker's tags is checked in code after them.
 */
import { CAPABILITY_TAG_PATTERN } from '../events/subjects.js';
import type { BodySchema, BodySchemaNode } from '../http/bodySchema.js';
import { NKEY_USER_PATTERN } from '../identity/nkeyPublic.js';

/** `POST /agents/<id>/approve`: optionally, the key the operator saw (`""` for none). */
export interface ApproveBody {
  nkey?: string;
}

export const APPROVE_BODY_SCHEMA: BodySchema = {
  name: 'agentApprove',
  schema: {
    type: 'object',
    'x-error': 'the body must be {"nkey": "U…"} (the key the operator saw), or nothing',
    properties: {
      nkey: {
        type: 'string',
        maxLength: 64,
        'x-error': '{param} must be the key the operator saw ("U…", or "" for none)',
      },
    },
  },
};

/** A list of capability tags; an item's error names the whole list, as the list's own does. */
function tags(what: string): BodySchemaNode {
  const message = `${what} must be a list of capability tags ([a-z0-9-]+), at most 64`;
  return {
    type: 'array',
    maxItems: 64,
    items: { type: 'string', pattern: CAPABILITY_TAG_PATTERN.source, 'x-error': message },
    'x-error': message,
    'x-expected': 'a list of capability tags ([a-z0-9-]+), at most 64',
  };
}

/** `POST /invites`: the scope and lifetime of the invite to mint. */
export interface InviteBody {
  tags?: string[];
  ttl?: string | number;
}

export const INVITE_BODY_SCHEMA: BodySchema = {
  name: 'inviteRequest',
  schema: {
    type: 'object',
    'x-error': 'request body must be a JSON object',
    properties: {
      tags: tags('tags'),
      ttl: { type: ['string', 'number'], maxLength: 32, 'x-error': '"ttl" must be a duration such as "1h"' },
    },
  },
};

/** `POST /join`: a joiner redeeming an invite for its key. */
export interface JoinBody {
  invite: string;
  nkey: string;
  name: string;
  proof: string;
  tags: string[];
}

/**
 * Fields checked one after the other, each for presence and then value, so the first problem named
 * is that of the first field in this order (a plain `required` list would name every missing field
 * before any malformed one).
 */
function inOrder(fields: ReadonlyArray<[name: string, node: BodySchemaNode]>): BodySchemaNode[] {
  return fields.map(([name, node]) => ({ required: [name], properties: { [name]: node } }));
}

export const JOIN_BODY_SCHEMA: BodySchema = {
  name: 'joinRequest',
  schema: {
    type: 'object',
    'x-error': 'request body must be a JSON object',
    allOf: inOrder([
      [
        'invite',
        {
          type: 'string',
          maxLength: 8192,
          'x-error': '"invite" must be the token `amf invite` printed',
          'x-expected': 'the token `amf invite` printed',
        },
      ],
      [
        'nkey',
        {
          type: 'string',
          pattern: NKEY_USER_PATTERN.source,
          'x-error': '"nkey" must be the agent\'s nkey public key (U…)',
          'x-expected': "the agent's nkey public key (U…)",
        },
      ],
      [
        'name',
        {
          type: 'string',
          pattern: '^[A-Za-z0-9._-]{1,64}$',
          'x-error': '"name" must be the agent name ([A-Za-z0-9._-]{1,64})',
          'x-expected': 'the agent name ([A-Za-z0-9._-]{1,64})',
        },
      ],
      [
        'proof',
        {
          type: 'string',
          pattern: '^[A-Za-z0-9_-]{86}$',
          'x-error': '"proof" must be an Ed25519 signature (base64url)',
          'x-expected': 'an Ed25519 signature (base64url)',
        },
      ],
      ['tags', tags('"tags"')],
    ]),
  },
};

/** `POST /tasks/send` on a worker: the task as text, and which of the worker's tags runs it. */
export interface WorkerTaskBody {
  text?: string;
  task?: string;
  tag?: string;
}

export const WORKER_TASK_BODY_SCHEMA: BodySchema = {
  name: 'workerTaskSend',
  schema: {
    type: 'object',
    'x-error': 'request body must be a JSON object',
    properties: {
      text: { type: 'string', 'x-expected': 'the task as a string' },
      task: { type: 'string', 'x-expected': 'the task as a string' },
      tag: { type: 'string', maxLength: 64, 'x-expected': 'one of the tags this worker serves' },
      // A direct task never shares the mesh's task-id space: the worker names it, so no caller can
      // make it run (and claim) a task under a mesh task's id.
      id: {
        not: {},
        'x-error':
          '"id" is not accepted: the worker names a direct task itself (the answer carries its task_id)',
      },
    },
  },
};

/**
 * The payload of an `amf.task.cancel` the operator sends to `POST /publish` (the CloudEvent around
 * it is checked by the event schemas): which task, and why. The task id may instead be the event's
 * `amftaskid`.
 */
export interface CancelPayload {
  task_id?: string;
  message?: string;
}

export const CANCEL_PAYLOAD_SCHEMA: BodySchema = {
  name: 'publishCancelPayload',
  schema: {
    type: 'object',
    'x-error': 'a cancel names its task: {param} must be an object {"task_id": "…", "message"?: "…"}',
    properties: {
      task_id: {
        type: 'string',
        pattern: '^[A-Za-z0-9-]{1,64}$',
        'x-error': 'a cancel names its task: {param} ([A-Za-z0-9-]{1,64})',
      },
      // Longer messages are cut to 500 characters, not refused.
      message: { type: 'string', 'x-expected': 'a string saying why' },
    },
  },
};
