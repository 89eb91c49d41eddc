/**
 * The announcement of a new task, built from a request: the payload every worker reads (the task,
 * its capability tag, retry rules, reply subject, conversation and delegation chain) in its
 * CloudEvent. The lifecycle checks the request against the mesh (tag served, room for the task)
 * before it asks for one.
 */
import { createEvent, type AmfEventOf, type EventSender } from '../events/cloudEvent.js';
import type { AnnouncePayload } from '../events/payloads.js';
import { replySubject } from '../events/subjects.js';
import type { AnnounceRequest, LifecycleOptions } from './taskRecord.js';

/**
 * The first announcement (attempt 1) of task `taskId`, sent by `sender`; `offerDigest` is the digest
 * of the nonce its work-queue offer will carry (offerNonce.ts), when it is offered there.
 */
export function announcementEvent(
  req: AnnounceRequest,
  taskId: string,
  sender: EventSender,
  defaults: Pick<LifecycleOptions, 'ttlSeconds' | 'maxRetries' | 'retryDelaySeconds'>,
  offerDigest?: string,
): AmfEventOf<'amf.task.announce'> {
  const payload: AnnouncePayload = {
    task_id: taskId,
    task: req.task,
    required_capability: req.tag,
    max_retries: req.maxRetries ?? defaults.maxRetries,
    retry_delay_seconds: req.retryDelaySeconds ?? defaults.retryDelaySeconds,
    attempt: 1,
  };
  if (req.withReplySubject !== false) payload.reply_subject = replySubject(taskId);
  if (req.messages) payload.messages = req.messages;
  if (req.stream) payload.stream = true;
  if (req.parentTaskId) payload.parent_task_id = req.parentTaskId;
  if (req.chain && req.chain.length > 0) payload.delegation_chain = req.chain;
  if (req.input) payload.input = req.input;
  if (req.messageId) payload.message_id = req.messageId;
  if (offerDigest !== undefined) payload.offer_digest = offerDigest;
  return createEvent({
    type: 'amf.task.announce',
    sender,
    payload,
    taskId,
    ttlSeconds: req.ttlSeconds ?? defaults.ttlSeconds,
    ...(req.traceId ? { traceId: req.traceId } : {}),
    ...(req.parentTaskId ? { parentId: req.parentTaskId } : {}),
    ...(req.chain ? { delegationChain: req.chain } : {}),
  });
}
