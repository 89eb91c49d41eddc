/**
 * The 15 AMF event types. The type doubles as the NATS subject, except that a task announcement is
 * published on `amf.task.announce.<tag>`, where observers and seed-style workers (queue group
 * `workers.<tag>`) take it; AMF workers pull it from the work queue instead (docs/decisions.md #5).
 */
export const AMF_EVENT_TYPES = [
  'amf.discovery.capability.advertise',
  'amf.discovery.agent.heartbeat',
  'amf.task.announce',
  'amf.task.claim',
  'amf.task.delegate',
  'amf.task.progress',
  'amf.task.blocked',
  /** The coordinator ends a task on the requester's behalf; the claiming worker aborts its handler. */
  'amf.task.cancel',
  /** The coordinator hands a blocked task's claimant the requester's follow-up message. */
  'amf.task.input',
  'amf.artifact.publish',
  'amf.evidence.publish',
  'amf.result.partial',
  'amf.result.final',
  'amf.policy.warning',
  'amf.policy.deny',
] as const;

export type AmfEventType = (typeof AMF_EVENT_TYPES)[number];

const TYPE_SET: ReadonlySet<string> = new Set(AMF_EVENT_TYPES);

/** True when `value` is one of the 15 AMF event types. */
export function isAmfEventType(value: unknown): value is AmfEventType {
  return typeof value === 'string' && TYPE_SET.has(value);
}

export const AGENT_ROLES = ['coordinator', 'specialist', 'watcher', 'connector'] as const;
export type AgentRole = (typeof AGENT_ROLES)[number];

export const VISIBILITIES = ['local', 'mesh', 'public'] as const;
export type Visibility = (typeof VISIBILITIES)[number];

/** Envelope schema version this implementation writes (our 1.1.0 fixes the gaps of 1.0.0). */
export const SCHEMA_VERSION = '1.1.0';
export const DATA_SCHEMA_URI = 'https://amf.spec/schemas/event-envelope/1.1.0';
