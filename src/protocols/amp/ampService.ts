/**
 * Answers AMP requests with the mesh: route the intent to a capability, enforce the sender's trust,
 * dispatch through the coordinator's task service (the same path as the OpenAI API), and turn the
 * worker's result — with its confidence (`amfconfidence`) and any uncertainty it reported — into an
 * AMP response. Deferred requests (`reply_to`, or `sync: false`) are answered at once with a job id;
 * the final response is stored for polling and POSTed to `reply_to`.
 */
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import type { TaskResult, TaskService } from '../../coordinator/tasks/taskService.js';
import type { ChatMessage } from '../../events/payloads.js';
import { toAmfError } from '../../errors.js';
import { wireErrorFor } from '../../http/wireErrors.js';
import { makeAmpResponse, type AmpRequest, type AmpResponse, type AmpUncertainty } from './ampMessage.js';
import { discoverAgents } from './ampDiscover.js';
import { AmpJobStore, type AmpJob } from './ampJobs.js';
import { deliverCallback, resolveCallback, type CallbackPolicy } from './callbackDelivery.js';
import { routeAmpMessage } from './ampRouting.js';
import { trustRefusal } from './trustLevels.js';
import type { LogFn } from '../../log.js';

/** Below this confidence a completed answer is reported as `partial` (spec: "completed with caveats"). */
export const LOW_CONFIDENCE = 0.5;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What the AMP service needs: the mesh's tasks and agents, and its own settings. */
export interface AmpServiceDeps {
  tasks: Pick<TaskService, 'submit'>;
  agents: AgentDirectory;
  /** The coordinator's id for `from.id` of responses. */
  selfId: () => string;
  /** Absolute URL of `POST /api/amp/message` (discover answers point there). */
  messageEndpoint: () => string;
  requestTimeoutMs: number;
  maxJobs: number;
  callbackPolicy: () => CallbackPolicy;
  /** First retry delay of reply_to deliveries (doubled per attempt). */
  callbackRetryDelayMs?: number;
  callbackAttempts?: number;
  log?: LogFn;
}

/** An AMP response and the HTTP status it travels with. */
export interface AmpReply {
  httpStatus: number;
  response: AmpResponse;
}

/**
 * AMP status, confidence and uncertainty of a completed mesh task. A worker reports uncertainty in
 * its result data (`data.uncertainty: {note, recommend}`); an answer below LOW_CONFIDENCE without one
 * gets a note saying so. Either makes the status `partial`.
 */
export function ampOutcome(result: Pick<TaskResult, 'confidence' | 'data'>): {
  status: 'ok' | 'partial';
  confidence?: number;
  uncertainty?: AmpUncertainty;
} {
  const confidence = Number.isFinite(result.confidence) ? result.confidence : undefined;
  const reported = result.data?.uncertainty;
  let uncertainty: AmpUncertainty | undefined;
  if (typeof reported === 'object' && reported !== null) {
    const r = reported as { note?: unknown; recommend?: unknown; suggest?: unknown };
    const recommend = typeof r.recommend === 'string' ? r.recommend : r.suggest;
    if (typeof r.note === 'string')
      uncertainty = {
        note: r.note.slice(0, 2000),
        ...(typeof recommend === 'string' ? { recommend: recommend.slice(0, 2000) } : {}),
      };
  }
  if (!uncertainty && confidence !== undefined && confidence < LOW_CONFIDENCE)
    uncertainty = {
      note: `the answering agent reported a low confidence (${confidence})`,
      recommend: 'verify the result or ask again with more context',
    };
  return {
    status: uncertainty ? 'partial' : 'ok',
    ...(confidence !== undefined ? { confidence } : {}),
    ...(uncertainty ? { uncertainty } : {}),
  };
}

/** Runs AMP requests against the mesh; owns the job store and the pending reply_to deliveries. */
export class AmpService {
  readonly jobs: AmpJobStore;
  private readonly closing = new AbortController();
  private readonly background = new Set<Promise<void>>();

  constructor(private readonly deps: AmpServiceDeps) {
    this.jobs = new AmpJobStore(deps.maxJobs);
  }

  private respond(
    message: AmpRequest,
    fields: Omit<Parameters<typeof makeAmpResponse>[0], 'inReplyTo' | 'fromId' | 'traceId'>,
  ): AmpResponse {
    return makeAmpResponse({
      ...fields,
      inReplyTo: message.id,
      fromId: this.deps.selfId(),
      ...(message.traceId ? { traceId: message.traceId } : {}),
    });
  }

  /** Handles a request received over HTTP: synchronously, or deferred with a job. */
  async handle(message: AmpRequest, signal?: AbortSignal): Promise<AmpReply> {
    if (message.replyTo === undefined && message.sync !== false) {
      return this.reply(message, signal);
    }
    if (message.replyTo !== undefined) {
      try {
        await resolveCallback(message.replyTo, this.deps.callbackPolicy());
      } catch (err) {
        const response = this.respond(message, {
          status: 'error',
          error: { code: 'invalid_message', message: toAmfError(err).message },
        });
        return { httpStatus: 400, response };
      }
    }
    const job = this.jobs.create(message.id, message.replyTo);
    if (!job) {
      const response = this.respond(message, {
        status: 'error',
        error: { code: 'overloaded', message: 'too many deferred jobs are running; try again later' },
      });
      return { httpStatus: 503, response };
    }
    const run = this.runJob(job, message).finally(() => this.background.delete(run));
    this.background.add(run);
    const response = this.respond(message, {
      status: 'deferred',
      result: {
        job_id: job.id,
        poll: `/api/amp/jobs/${job.id}`,
        ...(message.replyTo ? { reply_to: message.replyTo } : {}),
      },
    });
    return { httpStatus: 202, response };
  }

  /** The AMP response for one request, run to its end (used for sync requests and by jobs). */
  async answer(
    message: AmpRequest,
    signal?: AbortSignal,
    onTask?: (taskId: string) => void,
  ): Promise<AmpResponse> {
    return (await this.reply(message, signal, onTask)).response;
  }

  /**
   * The response with its HTTP status: 200 for every answer the mesh gave (refusals and failed
   * tasks included), the wire table's status when the request could not be served.
   */
  private async reply(
    message: AmpRequest,
    signal?: AbortSignal,
    onTask?: (taskId: string) => void,
  ): Promise<AmpReply> {
    const ok = (response: AmpResponse): AmpReply => ({ httpStatus: 200, response });
    if (message.type === 'discover') {
      const found = discoverAgents(
        this.deps.agents,
        { q: message.intent, capability: null, limit: 10 },
        this.deps.messageEndpoint(),
      );
      const count = found.count as number;
      return ok(
        this.respond(message, {
          status: count > 0 ? 'ok' : 'partial',
          confidence: count > 0 ? 0.9 : 0.3,
          result: found,
          ...(count === 0
            ? {
                uncertainty: {
                  note: 'no live agent matched the intent',
                  recommend: 'try other words or GET /api/amp/discover',
                },
              }
            : {}),
        }),
      );
    }
    const routing = routeAmpMessage(message, this.deps.agents);
    if (!routing.ok)
      return ok(
        this.respond(message, {
          status: routing.code === 'intent_unclear' ? 'error' : 'refused',
          error: { code: routing.code, message: routing.message },
        }),
      );
    const refusal = trustRefusal(message.trust, routing.tag, this.deps.agents);
    if (refusal)
      return ok(
        this.respond(message, { status: 'refused', error: { code: 'trust_insufficient', message: refusal } }),
      );
    let timeoutMs = this.deps.requestTimeoutMs;
    if (message.ttl !== undefined)
      timeoutMs = Math.max(
        1,
        Math.min(timeoutMs, Date.parse(message.timestamp) + message.ttl * 1000 - Date.now()),
      );
    const background = message.context?.background;
    const messages: ChatMessage[] | undefined =
      typeof background === 'string' && background.trim() !== ''
        ? [
            { role: 'system', content: background.slice(0, 8000) },
            { role: 'user', content: message.intent },
          ]
        : undefined;
    try {
      const result = await this.deps.tasks.submit({
        tag: routing.tag,
        task: message.intent,
        timeoutMs,
        ...(signal ? { signal } : {}),
        ...(messages ? { messages } : {}),
        ...(message.traceId && UUID.test(message.traceId) ? { traceId: message.traceId.toLowerCase() } : {}),
        input: {
          amp: {
            id: message.id,
            from: message.from,
            type: message.type,
            ...(message.context ? { context: message.context } : {}),
            ...(message.trust ? { trust: message.trust } : {}),
          },
        },
        onAnnounced: (taskId) => onTask?.(taskId),
      });
      const outcome = ampOutcome(result);
      return ok(
        this.respond(message, {
          ...outcome,
          result: {
            text: result.text,
            ...(result.data ? { data: result.data } : {}),
            capability: routing.tag,
            agent_id: result.agentId,
            task_id: result.taskId,
            amf_trace_id: result.traceId,
            routing: { via: routing.via, ...(routing.route ? { matched: routing.route.matched } : {}) },
          },
        }),
      );
    } catch (err) {
      const e = toAmfError(err);
      const amp = wireErrorFor(e.code).amp;
      return {
        httpStatus: amp.http,
        response: this.respond(message, {
          status: amp.status,
          error: { code: amp.code, message: e.message },
        }),
      };
    }
  }

  private async runJob(job: AmpJob, message: AmpRequest): Promise<void> {
    const response = await this.answer(message, this.closing.signal, (taskId) => (job.taskId = taskId));
    this.jobs.finish(job.id, response);
    if (!job.delivery) return;
    const outcome = await deliverCallback(job.delivery.replyTo, response, {
      policy: this.deps.callbackPolicy(),
      signal: this.closing.signal,
      ...(this.deps.callbackAttempts !== undefined ? { attempts: this.deps.callbackAttempts } : {}),
      ...(this.deps.callbackRetryDelayMs !== undefined
        ? { retryDelayMs: this.deps.callbackRetryDelayMs }
        : {}),
    });
    job.delivery.attempts = outcome.attempts;
    job.delivery.state = outcome.delivered ? 'delivered' : 'failed';
    if (outcome.error) job.delivery.error = outcome.error;
    if (!outcome.delivered)
      this.deps.log?.('warn', 'AMP reply_to delivery failed; the response stays available for polling', {
        job_id: job.id,
        attempts: outcome.attempts,
        error: outcome.error,
      });
  }

  /** Stops pending deliveries and waits for background jobs to settle. */
  async close(): Promise<void> {
    this.closing.abort();
    await Promise.allSettled([...this.background]);
  }
}
