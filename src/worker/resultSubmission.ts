/**
 * How a mesh task's final leaves its worker: sent straight to the task's coordinator, stored in the
 * durable results stream when no decision comes back. Also the shape of a final's payload.
 */
import { createEvent, type EventSender } from '../events/cloudEvent.js';
import type { FinalPayload, ResultArtifactPayload } from '../events/payloads.js';
import { finalSubject, resultSubject } from '../events/subjects.js';
import { agentFinalSubject, agentResultSubject } from '../fabric/agentUsers.js';
import { UNTIL_CLOSED, type EventBus } from '../fabric/eventBus.js';
import type { AgentKey } from '../identity/agentKey.js';
import { signEvent } from '../identity/eventSignature.js';
import type { LogFn } from '../log.js';
import type { ResultArtifact } from './handlerApi.js';
import type { LocalOutcome } from './invokeHandler.js';
import type { TaskInput } from './meshWorkerOptions.js';

/**
 * How long a worker waits for its coordinator's decision on a final sent straight to it before it
 * stores the final durably instead (a coordinator answers in well under a millisecond when alive).
 */
const DIRECT_FINAL_TIMEOUT_MS = 3_000;
const decoder = new TextDecoder();

/** True when the coordinator's answer is a decision (accepted or refused): nothing left to store. */
function isFinalDecision(answer: Uint8Array | undefined): boolean {
  if (!answer) return false;
  try {
    const decision = (JSON.parse(decoder.decode(answer)) as { decision?: unknown }).decision;
    return decision === 'accepted' || decision === 'refused';
  } catch {
    return false;
  }
}

/** The worker as its result submission sees it. */
export interface ResultSubmitter {
  bus: EventBus;
  sender: EventSender;
  key: AgentKey;
  agentId: string;
  /** The worker's name (part of the stored result's message id). */
  name: string;
  /** Stores on its key's own subject (MeshWorkerOptions.ownSubjects), else on the seed's. */
  ownSubjects: boolean;
  log: LogFn | undefined;
  /** Publishes a progress event for `task` (a sign of life while storing waits). */
  progress: (task: TaskInput, message: string) => void;
}

/** The final payload of a handler's outcome; a mesh task's names the offer it came with. */
export function finalPayload(
  taskId: string,
  agentId: string,
  outcome: LocalOutcome,
  offer?: string,
): FinalPayload {
  const payload: FinalPayload = outcome.ok
    ? {
        task_id: taskId,
        agent_id: agentId,
        status: 'completed',
        result: {
          text: outcome.result.text,
          ...(outcome.result.data ? { data: outcome.result.data } : {}),
          ...(outcome.result.artifacts ? { artifacts: toArtifactPayloads(outcome.result.artifacts) } : {}),
          ...(outcome.result.respondWith === 'message' ? { respond_with: 'message' as const } : {}),
        },
        ...(outcome.result.usage ? { usage: outcome.result.usage } : {}),
      }
    : {
        task_id: taskId,
        agent_id: agentId,
        status: 'failed',
        error: {
          code: outcome.code,
          message: outcome.message,
          // The thrown message: the operator's views show it, clients get `message` (invokeHandler.ts).
          ...(outcome.detail !== undefined ? { detail: outcome.detail.slice(0, 4000) } : {}),
        },
      };
  if (offer !== undefined) payload.offer = offer;
  return payload;
}

/**
 * A mesh task's final never goes onto `amf.result.final` from here: the coordinator that accepts it
 * (the task is still open and claimed by this worker) publishes the one canonical final, so a stale
 * worker's late answer can never become a second terminal event. It is first sent straight to the
 * task's coordinator (request/reply); only when no decision comes back (coordinator gone, NATS
 * down) is it stored in the durable results stream, retried across NATS outages until stored
 * (docs/reliability.md). The work-queue message is acknowledged only after either.
 */
export async function submitResult(
  worker: ResultSubmitter,
  task: TaskInput,
  payload: FinalPayload,
  confidence?: number,
): Promise<void> {
  // One signature, in the split form of finals: the coordinator that relays the result carries it
  // over, so the answer stays verifiable as this worker's (identity/eventSignature.ts).
  const finalEvent = (final: FinalPayload, conf?: number) =>
    signEvent(
      createEvent({
        type: 'amf.result.final',
        sender: worker.sender,
        payload: final,
        taskId: task.taskId,
        traceId: task.traceId,
        ...(conf !== undefined ? { confidence: conf } : {}),
      }),
      worker.key,
    );
  const answer = await worker.bus.request(
    finalEvent(payload, confidence),
    worker.ownSubjects ? agentFinalSubject(worker.key.publicKey, task.taskId) : finalSubject(task.taskId),
    DIRECT_FINAL_TIMEOUT_MS,
  );
  if (isFinalDecision(answer)) return;
  const storeSubject = worker.ownSubjects
    ? agentResultSubject(worker.key.publicKey, task.taskId)
    : resultSubject(task.taskId);
  const store = (final: FinalPayload, conf?: number) =>
    worker.bus.publishDurable(finalEvent(final, conf), storeSubject, {
      msgId: `${task.taskId}.${task.attempt}.${worker.name}`,
      // Kept and retried for as long as the worker runs (a full disk, an outage of any length):
      // given up, the answer would be lost although the handler ran.
      giveUpMs: UNTIL_CLOSED,
      onRetry: (err) => {
        worker.log?.('warn', 'result not stored yet; retrying', {
          task_id: task.taskId,
          err: String(err),
        });
        // A sign of life for the coordinator's watchdog: the work is done, only storing waits.
        worker.progress(task, 'result not stored yet; retrying');
      },
    });
  let outcome = await store(payload, confidence);
  if (outcome === 'too_large')
    // The answer cannot travel: the task still ends, as a failure that says why.
    outcome = await store(
      {
        task_id: task.taskId,
        agent_id: worker.agentId,
        status: 'failed',
        error: {
          code: 'result_too_large',
          message: 'the result is larger than the fabric carries (NATS max_payload)',
        },
        ...(payload.offer !== undefined ? { offer: payload.offer } : {}),
      },
      0,
    );
  if (outcome !== 'stored')
    worker.log?.(
      'error',
      `the result of task ${task.taskId} was not stored before the worker stopped; the coordinator will retry or expire the task`,
      { task_id: task.taskId },
    );
}

/** A handler's artifacts as they travel in a final result (plain JSON, at most 32). */
function toArtifactPayloads(artifacts: readonly ResultArtifact[]): ResultArtifactPayload[] {
  return artifacts.slice(0, 32).map((a) => ({
    ...(a.name !== undefined ? { name: String(a.name) } : {}),
    ...(a.description !== undefined ? { description: String(a.description) } : {}),
    parts: (Array.isArray(a.parts) ? a.parts : []).map((p) => ({ ...p }) as Record<string, unknown>),
  }));
}
