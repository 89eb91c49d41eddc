/**
 * `POST /publish`: the HTTP edge speaks for no one else. Whatever a request body claims about who
 * sent it (`source`, `amfagentrole`, `amftrustdomain`, `data.auth_context`), the event that reaches
 * the fabric names the authenticated caller instead, and never with role `coordinator`: workers act
 * on `amf.task.cancel` only from that role, and the fabric trusts a coordinator's notices.
 *
 * Who may publish what (docs/security.md, "HTTP edge"):
 *
 * - anonymous (no API key configured, so nobody authenticates): `amf.artifact.publish` and
 *   `amf.evidence.publish` only, published as identity `amf:http-client`, role `connector`;
 * - the operator (an API key is configured and the request presented it): the same two types as
 *   `amf:operator`, plus `amf.task.announce` and `amf.task.cancel`, which are not injected raw but
 *   run through the task lifecycle — the coordinator announces or cancels in its own name on the
 *   operator's request, so a cancel ends the task with exactly one terminal event;
 * - nobody: the events that belong to a worker (claim, progress, blocked, delegate, results), to an
 *   agent's own heartbeat, or to the coordinator's notices and advertisements. Through this door they
 *   could only be forgeries: the real ones travel on NATS under the sender's own credential.
 *
 * Artifacts and evidence are held to `artifacts.max_event_bytes` (413) and to a quota per caller, the
 * one each agent has (429): they land in AMF_ARTIFACTS, which no caller may fill for everyone else.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AmfError } from '../../errors.js';
import { parseAnnouncement } from '../../events/announcement.js';
import type { AmfEvent, AmfEventOf, AuthContext } from '../../events/cloudEvent.js';
import { parseCloudEventRequest } from '../../events/cloudEventsHttp.js';
import type { AgentRole, AmfEventType } from '../../events/eventTypes.js';
import { isTaskId } from '../../events/subjects.js';
import type { AmfConfig } from '../../config/config.js';
import type { ArtifactIntake } from '../../coordinator/artifactIntake.js';
import type { TaskService } from '../../coordinator/tasks/taskService.js';
import { bodyValidator } from '../../http/bodyValidator.js';
import { readBody, sendJson } from '../../http/httpKit.js';
import { CANCEL_PAYLOAD_SCHEMA, type CancelPayload } from '../routeBodySchemas.js';

/** What `/publish` needs: the mesh's tasks, the artifact quotas and a raw publish, never the Coordinator. */
export interface PublishDeps {
  tasks: Pick<TaskService, 'announce' | 'get' | 'cancel'>;
  /** The size cap and per-publisher quota artifacts and evidence are held to (artifactIntake.ts). */
  artifacts: Pick<ArtifactIntake, 'limits' | 'admitOther'>;
  /** The event as the bus encodes it (EventBus.takeBytes). */
  encode: (event: AmfEvent) => Uint8Array;
  /** Publishes encoded bytes on a subject, as they are. */
  publish: (subject: string, bytes: Uint8Array) => void;
  config: AmfConfig;
}

/** Who is publishing, as the edge authenticated it (never as the body says). */
export interface PublishCaller {
  kind: 'anonymous' | 'operator';
  identity: string;
  source: string;
  /** `connector`: an outside party bringing data in, the least trusted role the schema knows. */
  role: Exclude<AgentRole, 'coordinator'>;
}

export const ANONYMOUS_CALLER: PublishCaller = {
  kind: 'anonymous',
  identity: 'amf:http-client',
  source: 'urn:amf:http-client',
  role: 'connector',
};

export const OPERATOR_CALLER: PublishCaller = {
  kind: 'operator',
  identity: 'amf:operator',
  source: 'urn:amf:operator',
  role: 'connector',
};

/** Types published as they are (re-stamped with the caller), for anyone who may use the route. */
const DATA_TYPES = ['amf.artifact.publish', 'amf.evidence.publish'] as const;
type DataType = (typeof DATA_TYPES)[number];
/** Types the operator may ask the lifecycle to carry out. */
const OPERATOR_TYPES = ['amf.task.announce', 'amf.task.cancel'] as const;

/** Why a type is never accepted here, whoever asks: the message of its 403. */
const NEVER: Record<Exclude<AmfEventType, DataType | (typeof OPERATOR_TYPES)[number]>, string> = {
  'amf.task.claim': 'a claim is published by the claiming worker on NATS under its own identity',
  'amf.task.progress': 'task progress is published by the claiming worker on NATS under its own identity',
  'amf.task.blocked': 'a blocked notice is published by the claiming worker on NATS under its own identity',
  'amf.task.input':
    "a task's follow-up input is sent by the coordinator for the requester (A2A: a message with the task's id)",
  'amf.task.delegate': 'a delegation is published by the claiming worker on NATS under its own identity',
  'amf.result.partial': 'results are published by the claiming worker on NATS under its own identity',
  'amf.result.final': 'results are published by the claiming worker on NATS under its own identity',
  'amf.discovery.agent.heartbeat':
    'a heartbeat is published by the agent itself on NATS under its own identity',
  'amf.discovery.capability.advertise': 'advertisements are published by the coordinator after admission',
  'amf.policy.warning': 'policy notices are published by the coordinator itself',
  'amf.policy.deny': 'policy notices are published by the coordinator itself',
};

/** The event types `caller` may send to `/publish`. */
export function publishableTypes(caller: PublishCaller): readonly AmfEventType[] {
  return caller.kind === 'operator' ? [...DATA_TYPES, ...OPERATOR_TYPES] : DATA_TYPES;
}

function forbidden(type: AmfEventType, caller: PublishCaller, why: string): AmfError {
  return new AmfError('FORBIDDEN', `${type} is not accepted on /publish from ${caller.identity}: ${why}`, {
    type,
    caller: caller.identity,
    allowed: publishableTypes(caller),
  });
}

/**
 * The event as the caller may publish it: every attribute that says who sent it is the caller's.
 * What it says (payload, refs, trace and task ids, visibility, confidence, TTL) stays as sent.
 */
export function stampWithCaller<T extends DataType>(
  event: AmfEventOf<T>,
  caller: PublishCaller,
  trustDomain: string,
): AmfEventOf<T> {
  const auth: AuthContext = {
    identity: caller.identity,
    trust_domain: trustDomain,
    // No scope: an HTTP caller holds none of the mesh's authorities (claim, dispatch, classify).
    scopes: [],
    granted_by: caller.identity,
    delegation_chain: [],
  };
  return {
    ...event,
    source: caller.source,
    amfagentrole: caller.role,
    amftrustdomain: trustDomain,
    data: { ...event.data, auth_context: auth },
  };
}

const MAX_CANCEL_MESSAGE = 500;
const checkCancelPayload = bodyValidator<CancelPayload>(CANCEL_PAYLOAD_SCHEMA, {
  prefix: 'data.payload',
  root: 'data.payload',
});

/** Handles one `POST /publish` from `caller`. */
export async function handlePublish(
  req: IncomingMessage,
  res: ServerResponse,
  deps: PublishDeps,
  caller: PublishCaller,
): Promise<void> {
  const { config } = deps;
  const body = await readBody(req, config.tasks.maxTaskBytes);
  const parsed = parseCloudEventRequest(req.headers, body);
  if (!parsed.ok) {
    sendJson(res, 400, {
      error: {
        code: 'INVALID_EVENT',
        message: 'the event is not a valid AMF CloudEvent',
        reasons: parsed.errors,
      },
    });
    return;
  }
  const event = parsed.value;
  const trustDomain = config.identity.trustDomain;
  const publishedAs = { source: caller.source, role: caller.role, identity: caller.identity };
  switch (event.type) {
    case 'amf.artifact.publish':
    case 'amf.evidence.publish': {
      const stamped = stampWithCaller(event, caller, trustDomain);
      const bytes = deps.encode(stamped);
      admitData(deps.artifacts, caller, stamped.type, bytes.length);
      deps.publish(stamped.type, bytes);
      sendJson(res, 202, {
        accepted: true,
        id: stamped.id,
        subject: stamped.type,
        published_as: publishedAs,
      });
      return;
    }
    case 'amf.task.announce':
      if (caller.kind !== 'operator') throw forbidden(event.type, caller, operatorOnly('announce tasks'));
      return announce(res, deps, event, publishedAs);
    case 'amf.task.cancel':
      if (caller.kind !== 'operator') throw forbidden(event.type, caller, operatorOnly('cancel tasks'));
      return cancel(res, deps, event, caller, publishedAs);
    default:
      throw forbidden(event.type, caller, NEVER[event.type]);
  }
}

/**
 * Artifacts and evidence from the edge are held to the size cap and per-publisher quota agents have
 * (coordinator/artifactIntake.ts), so no caller can push others' artifacts out of AMF_ARTIFACTS.
 */
function admitData(
  artifacts: PublishDeps['artifacts'],
  caller: PublishCaller,
  type: DataType,
  bytes: number,
): void {
  const { maxEventBytes, agentEventsPerMinute, agentBytesPerMinute } = artifacts.limits;
  const refusal = artifacts.admitOther(caller.identity, bytes);
  if (refusal === 'artifact_too_large')
    throw new AmfError(
      'PAYLOAD_TOO_LARGE',
      `the ${type} event would be ${bytes} bytes, more than artifacts.max_event_bytes (${maxEventBytes}); large artifacts travel by reference`,
      { event_bytes: bytes, max_event_bytes: maxEventBytes },
    );
  if (refusal === 'quota_exceeded')
    throw new AmfError(
      'RATE_LIMITED',
      `${caller.identity} published more artifacts and evidence than its quota of ${agentEventsPerMinute} events and ${agentBytesPerMinute} bytes a minute (artifacts.agent_events_per_minute, artifacts.agent_bytes_per_minute): retry later`,
      { quota_events_per_minute: agentEventsPerMinute, quota_bytes_per_minute: agentBytesPerMinute },
    );
}

function operatorOnly(what: string): string {
  return `only the operator may ${what} through /publish (start the coordinator with --api-key and send Authorization: Bearer <key>); POST /v1/chat/completions or /a2a announce tasks for any client`;
}

/** An announcement runs through the lifecycle: TTLs, retries and one terminal event. */
function announce(
  res: ServerResponse,
  deps: PublishDeps,
  event: AmfEventOf<'amf.task.announce'>,
  publishedAs: Record<string, string>,
): void {
  const parsed = parseAnnouncement(event.data.payload, { otherReplySubject: 'reject' });
  if (!parsed.ok && parsed.reason === 'invalid_announce')
    throw new AmfError('INVALID_REQUEST', `invalid announcement: ${parsed.problem}`, {
      reasons: [`/data/payload: ${parsed.problem}`],
    });
  if (!parsed.ok)
    throw new AmfError('INVALID_REQUEST', parsed.problem, {
      reasons: [`/data/payload/reply_subject: must be ${parsed.expectedReplySubject}`],
    });
  const p = parsed.payload;
  const task = deps.tasks.announce({
    tag: p.required_capability,
    task: p.task,
    taskId: p.task_id,
    ttlSeconds: event.amfttl > 0 ? event.amfttl : deps.config.tasks.ttlSeconds,
    ...(event.amftraceid ? { traceId: event.amftraceid } : {}),
    ...(p.max_retries !== undefined ? { maxRetries: p.max_retries } : {}),
    ...(p.retry_delay_seconds !== undefined ? { retryDelaySeconds: p.retry_delay_seconds } : {}),
    ...(p.messages ? { messages: p.messages } : {}),
    ...(p.input ? { input: p.input } : {}),
  });
  sendJson(res, 202, {
    accepted: true,
    id: event.id,
    task_id: task.taskId,
    subject: `amf.task.announce.${task.tag}`,
    published_as: publishedAs,
  });
}

/**
 * A cancel is the lifecycle's: it tells the claimant to stop and writes the task's one terminal
 * event. Injected raw, it would stop the worker and leave the task without an ending (or, from
 * another coordinator's point of view, with two).
 */
function cancel(
  res: ServerResponse,
  deps: PublishDeps,
  event: AmfEventOf<'amf.task.cancel'>,
  caller: PublishCaller,
  publishedAs: Record<string, string>,
): void {
  // The envelope was validated by the event schemas; the payload is checked by its own.
  const checked = checkCancelPayload(event.data.payload);
  if (!checked.ok)
    throw new AmfError('INVALID_REQUEST', checked.problem.message, {
      reasons: [`/${checked.problem.param.replace(/\./g, '/')}: ${checked.problem.message}`],
    });
  const taskId = checked.value.task_id ?? event.amftaskid;
  if (taskId === undefined || !isTaskId(taskId))
    throw new AmfError(
      'INVALID_REQUEST',
      'a cancel names its task: data.payload.task_id ([A-Za-z0-9-]{1,64})',
      {
        reasons: ['/data/payload/task_id: required, [A-Za-z0-9-]{1,64}'],
      },
    );
  const known = deps.tasks.get(taskId);
  if (!known) throw new AmfError('NOT_FOUND', `no task ${taskId} is known to this coordinator`);
  const given = checked.value.message?.slice(0, MAX_CANCEL_MESSAGE) ?? '';
  const message = `cancelled by ${caller.identity}${given ? `: ${given}` : ''}`;
  if (!deps.tasks.cancel(taskId, 'task_cancelled', message))
    throw new AmfError('INVALID_REQUEST', `task ${taskId} has already ended (${known.state})`, {
      task_id: taskId,
      state: known.state,
    });
  sendJson(res, 202, {
    accepted: true,
    id: event.id,
    task_id: taskId,
    subject: 'amf.task.cancel',
    published_as: publishedAs,
  });
}
