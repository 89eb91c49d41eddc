/**
 * The AMF event envelope: a CloudEvents 1.0 structured-mode JSON object with the AMF extension
 * attributes. `createEvent` fills the defaults the reference implementation uses so every event
 * carries trace ids, provenance and confidence.
 */
import { randomUUID } from 'node:crypto';
import {
  DATA_SCHEMA_URI,
  SCHEMA_VERSION,
  type AgentRole,
  type AmfEventType,
  type Visibility,
} from './eventTypes.js';
import type { AmfPayloadMap } from './payloads.js';
import { AmfError } from '../errors.js';

/** Who sent an event and under which authority (schema 1.1.0 adds the v0.2 delegation fields). */
export interface AuthContext {
  identity: string;
  trust_domain: string;
  scopes?: string[];
  granted_by?: string;
  delegation_chain?: string[];
  issued_at?: string;
  expires_at?: string;
  svid_verified?: boolean;
}

export interface EventData<P extends object = object> {
  payload: P;
  auth_context: AuthContext;
  artifact_refs?: string[];
  evidence_refs?: string[];
}

/**
 * The envelope with a payload of type `P`. Code that knows the event type uses `AmfEventOf<T>`, and
 * code that receives any event uses `AnyAmfEvent`, where a switch on `type` narrows the payload.
 */
export interface AmfEvent<P extends object = object, T extends AmfEventType = AmfEventType> {
  specversion: '1.0';
  id: string;
  source: string;
  type: T;
  time: string;
  datacontenttype: 'application/json';
  dataschema?: string;
  subject?: string;
  amftraceid?: string;
  amfparentid?: string;
  amftaskid?: string;
  amfagentrole: AgentRole;
  amfvisibility: Visibility;
  amfconfidence: string;
  amfttl: number;
  amfschemaversion: string;
  amftrustdomain?: string;
  data: EventData<P>;
}

/** An event of type `T` with the payload that type carries (payloads.ts, `AmfPayloadMap`). */
export type AmfEventOf<T extends AmfEventType> = AmfEvent<AmfPayloadMap[T], T>;

/**
 * Any AMF event, as a union discriminated by `type`. The envelope validator checks the envelope, not
 * the payload: the payload type is what the sender promised, so readers still run the payload guards
 * (`check*Payload`, `parseAnnouncement`) before trusting the fields they depend on.
 */
export type AnyAmfEvent = { [T in AmfEventType]: AmfEventOf<T> }[AmfEventType];

/** The sender of events: an agent identity with its role and trust domain. */
export interface EventSender {
  identity: string;
  source: string;
  role: AgentRole;
  trustDomain: string;
  visibility?: Visibility;
}

export interface CreateEventOptions<T extends AmfEventType> {
  type: T;
  sender: EventSender;
  payload: AmfPayloadMap[T];
  taskId?: string;
  traceId?: string;
  parentId?: string;
  confidence?: number;
  ttlSeconds?: number;
  delegationChain?: string[];
  artifactRefs?: string[];
  evidenceRefs?: string[];
}

/** Default scopes per role (notes/amf.md section 3, scope vocabulary). */
const ROLE_SCOPES: Record<AgentRole, string[]> = {
  coordinator: ['dispatch:tasks', 'read:registry', 'write:registry', 'call:mcp'],
  specialist: ['claim:tasks', 'call:mcp'],
  watcher: ['classify'],
  connector: ['ingest:raw'],
};

/** Formats a confidence in [0, 1] as the CloudEvents string form ("0.85"). */
export function formatConfidence(value: number): string {
  if (!Number.isFinite(value) || value < 0 || value > 1)
    throw new AmfError('INVALID_REQUEST', `confidence must be in [0, 1], got ${value}`);
  if (value === 1) return '1.0';
  if (value === 0) return '0.0';
  return String(Math.round(value * 1000) / 1000);
}

/** Builds an AMF event with all required extensions filled. */
export function createEvent<T extends AmfEventType>(options: CreateEventOptions<T>): AmfEventOf<T> {
  const { sender } = options;
  const auth: AuthContext = {
    identity: sender.identity,
    trust_domain: sender.trustDomain,
    scopes: ROLE_SCOPES[sender.role],
    granted_by: sender.identity,
    delegation_chain: options.delegationChain ?? [],
  };
  const data: EventData<AmfPayloadMap[T]> = { payload: options.payload, auth_context: auth };
  if (options.artifactRefs) data.artifact_refs = options.artifactRefs;
  if (options.evidenceRefs) data.evidence_refs = options.evidenceRefs;
  const event: AmfEventOf<T> = {
    specversion: '1.0',
    id: randomUUID(),
    source: sender.source,
    type: options.type,
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    dataschema: DATA_SCHEMA_URI,
    amfagentrole: sender.role,
    amfvisibility: sender.visibility ?? 'local',
    amfconfidence: formatConfidence(options.confidence ?? 1),
    amfttl: options.ttlSeconds ?? 60,
    amfschemaversion: SCHEMA_VERSION,
    amftrustdomain: sender.trustDomain,
    amftraceid: options.traceId ?? randomUUID(),
    data,
  };
  if (options.taskId !== undefined) {
    event.amftaskid = options.taskId;
    event.subject = options.taskId;
  }
  if (options.parentId !== undefined) event.amfparentid = options.parentId;
  return event;
}
