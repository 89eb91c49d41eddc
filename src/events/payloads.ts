/**
 * Payload shapes of the task and result events. Workers and the coordinator agree on these; every
 * payload read from the fabric goes through the guards below before it is trusted.
 */
import type { AgentRecord } from './agentRecord.js';

/** The input of a task: the text, and for chat requests the whole conversation. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

export interface AnnouncePayload {
  task_id: string;
  task: string;
  required_capability: string;
  reply_subject?: string;
  messages?: ChatMessage[];
  /** The requester wants `amf.result.partial` chunks. */
  stream?: boolean;
  /** Retries left for TTL expiry and lost workers (docs/decisions.md #6). */
  max_retries?: number;
  retry_delay_seconds?: number;
  /** 1 for the first announcement, +1 for every republish. */
  attempt?: number;
  parent_task_id?: string;
  /** Agents that delegated on the way to this task, root first (docs/decisions.md #7). */
  delegation_chain?: string[];
  /** Arbitrary structured input for handlers that want more than text. */
  input?: Record<string, unknown>;
  /** The A2A message id that started the task (handlers may act on it). */
  message_id?: string;
  /**
   * SHA-256 (base64url) of this announcement's offer nonce, which travels only in its work-queue
   * message: a claim counts only when it names the nonce (coordinator/tasks/offerNonce.ts).
   */
  offer_digest?: string;
}

export interface ClaimPayload {
  task_id: string;
  agent_id: string;
  required_capability?: string;
  attempt?: number;
  /** The offer nonce of the work-queue message the claimant took (a mesh task's announcement). */
  offer?: string;
}

export interface ProgressPayload {
  task_id: string;
  agent_id: string;
  message?: string;
  percent?: number;
}

export interface BlockedPayload {
  task_id: string;
  agent_id: string;
  reason: string;
}

export interface PartialPayload {
  task_id: string;
  agent_id: string;
  seq: number;
  delta: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

export interface FinalPayload {
  task_id: string;
  agent_id: string;
  status: 'completed' | 'failed';
  result?: {
    text: string;
    data?: Record<string, unknown>;
    /** Further artifacts of the answer (the handler's `artifacts`, as A2A shows them). */
    artifacts?: ResultArtifactPayload[];
    /** `message`: A2A shows the answer as a Message rather than a Task (the handler's `respondWith`). */
    respond_with?: 'message';
  };
  /** `detail`: the handler's own message of a failure, for the operator's views only (not clients). */
  error?: { code: string; message: string; detail?: string };
  usage?: Usage;
  /** The offer nonce the worker took the task with (a mesh task's result may stand in for its claim). */
  offer?: string;
}

/**
 * The `error.code` of a failed final whose handler ran past its timeout (worker/handlerTimeout.ts):
 * the attempt ended, not the task; the coordinator offers it to another worker while retries remain.
 */
export const HANDLER_TIMEOUT_CODE = 'handler_timeout';

/** An artifact in a final result: parts are `{text}`, `{data}` or `{file: {name, mediaType, bytes|uri}}`. */
export interface ResultArtifactPayload {
  name?: string;
  description?: string;
  parts: Array<Record<string, unknown>>;
}

/** `amf.task.input`: a requester's follow-up message for the blocked task's claimant (`agent_id`). */
export interface InputPayload {
  task_id: string;
  agent_id: string;
  text: string;
  data?: Record<string, unknown>;
  message_id?: string;
}

/** `amf.task.cancel`: the coordinator ended the task; the claimant stops and publishes no result. */
export interface CancelPayload {
  task_id: string;
  /** `claim_refused`: only the named agent stops (its claim lost to another, or the task had ended). */
  reason: 'requester_timeout' | 'requester_cancelled' | 'task_cancelled' | 'claim_refused';
  message: string;
  /** The claimant when the task was claimed; with it, only that agent stops. */
  agent_id?: string;
}

export interface DelegatePayload {
  parent_task_id: string;
  /** Chosen by the delegating worker so it can wait for the child's result. */
  child_task_id: string;
  agent_id: string;
  task: string;
  required_capability: string;
  input?: Record<string, unknown>;
  /**
   * A subject in the delegator's own NATS inbox: the coordinator sends the child's final there, the
   * one place the delegator takes it from (no other agent may publish into it).
   */
  reply_inbox?: string;
}

/**
 * What an admission notice judged, named even when the advertisement carried no usable id: the
 * door it came through, who sent it (mDNS sender address, or `nats:<identity>`), its mDNS instance
 * name and advertised endpoint when it had them. Values are the sender's, cut to 256 characters.
 */
export interface AdvertisementRef {
  door: 'mdns' | 'nats';
  source: string;
  raw_id?: string;
  instance?: string;
  endpoint?: string;
  agent_id?: string;
}

/** Coordinator notices: warnings and denials, terminal when they end a task. */
export interface PolicyPayload {
  reason: string;
  message: string;
  task_id?: string;
  agent_id?: string;
  /** Admission notices: the advertisement judged (schema 1.1.0 payloads are open objects). */
  advertisement?: AdvertisementRef;
  /** This notice ends the task (expired or failed). */
  terminal?: boolean;
  state?: 'expired' | 'failed';
  retrying?: boolean;
  details?: Record<string, unknown>;
}

/** `amf.discovery.capability.advertise`: the coordinator tells the mesh an agent joined or changed. */
export interface AdvertisePayload extends AgentRecord {
  admitted_at: string;
  change: 'admitted' | 'changed' | 'online';
}

/**
 * The payload each AMF event type carries. Artifacts and evidence have no payload shape of their
 * own yet, so they carry any JSON object (the envelope schema's `payload: object`). A type missing
 * here fails to compile where `AmfEventOf` indexes the map.
 */
export interface AmfPayloadMap {
  'amf.discovery.capability.advertise': AdvertisePayload;
  'amf.discovery.agent.heartbeat': AgentRecord;
  'amf.task.announce': AnnouncePayload;
  'amf.task.claim': ClaimPayload;
  'amf.task.delegate': DelegatePayload;
  'amf.task.progress': ProgressPayload;
  'amf.task.blocked': BlockedPayload;
  'amf.task.cancel': CancelPayload;
  'amf.task.input': InputPayload;
  'amf.artifact.publish': object;
  'amf.evidence.publish': object;
  'amf.result.partial': PartialPayload;
  'amf.result.final': FinalPayload;
  'amf.policy.warning': PolicyPayload;
  'amf.policy.deny': PolicyPayload;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isString(v: unknown, max = 1 << 20): v is string {
  return typeof v === 'string' && v.length <= max;
}

/** Reads `task_id` from any task or result payload. */
export function payloadTaskId(payload: unknown): string | undefined {
  return isObject(payload) && typeof payload.task_id === 'string' ? payload.task_id : undefined;
}

/** Reads `agent_id` from a claim, progress or result payload. */
export function payloadAgentId(payload: unknown): string | undefined {
  return isObject(payload) && typeof payload.agent_id === 'string' ? payload.agent_id : undefined;
}

/** Checks an announcement payload; returns the problem or undefined when it is well formed. */
export function checkAnnouncePayload(p: unknown): string | undefined {
  if (!isObject(p)) return 'payload must be an object';
  if (!isString(p.task_id, 64) || p.task_id.length === 0) return 'payload.task_id must be a non-empty string';
  if (!isString(p.task)) return 'payload.task must be a string';
  if (!isString(p.required_capability, 64)) return 'payload.required_capability must be a string';
  if (p.reply_subject !== undefined && !isString(p.reply_subject, 256))
    return 'payload.reply_subject must be a string';
  if (p.max_retries !== undefined && !(Number.isInteger(p.max_retries) && (p.max_retries as number) >= 0))
    return 'payload.max_retries must be a non-negative integer';
  if (
    p.retry_delay_seconds !== undefined &&
    !(
      typeof p.retry_delay_seconds === 'number' &&
      p.retry_delay_seconds >= 0 &&
      p.retry_delay_seconds <= 3600
    )
  )
    return 'payload.retry_delay_seconds must be a number between 0 and 3600';
  if (p.messages !== undefined) {
    if (!Array.isArray(p.messages)) return 'payload.messages must be an array';
    for (const m of p.messages) {
      if (!isObject(m) || !isString(m.role, 32) || !isString(m.content))
        return 'payload.messages items need role and content strings';
    }
  }
  if (
    p.delegation_chain !== undefined &&
    !(Array.isArray(p.delegation_chain) && p.delegation_chain.every((a) => isString(a, 512)))
  )
    return 'payload.delegation_chain must be an array of strings';
  return undefined;
}

/** Checks a delegation request payload. */
export function checkDelegatePayload(p: unknown): string | undefined {
  if (!isObject(p)) return 'payload must be an object';
  for (const key of ['parent_task_id', 'child_task_id', 'agent_id', 'task', 'required_capability'] as const) {
    if (!isString(p[key]) || (p[key] as string).length === 0)
      return `payload.${key} must be a non-empty string`;
  }
  return undefined;
}

/** Checks a final result payload. */
export function checkFinalPayload(p: unknown): string | undefined {
  if (!isObject(p)) return 'payload must be an object';
  if (!isString(p.task_id, 64)) return 'payload.task_id must be a string';
  if (p.status !== 'completed' && p.status !== 'failed')
    return 'payload.status must be "completed" or "failed"';
  if (p.status === 'completed' && !(isObject(p.result) && isString(p.result.text)))
    return 'payload.result.text must be a string for a completed task';
  return undefined;
}
