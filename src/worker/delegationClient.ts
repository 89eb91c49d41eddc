/**
 * A worker's delegations: publishes `amf.task.delegate` for a child task and waits for the child's
 * final result. The coordinator decides whether the delegation is allowed (cycles, depth, policy); a
 * terminal `amf.policy.deny` for the child rejects the wait.
 *
 * The child's final is taken from one place only: this worker's own NATS inbox, named in the
 * delegation (`reply_inbox`), where the coordinator that accepted the child's result sends it. NATS
 * lets no other agent publish there, so a final forged by another admitted agent on the shared
 * `amf.result.final` subject (which any agent may publish, for its direct tasks) never becomes the
 * parent's answer: this worker does not even listen there.
 */
import { randomUUID } from 'node:crypto';
import type { Subscription } from '@nats-io/transport-node';
import type { AmfEventOf } from '../events/cloudEvent.js';
import type { DelegatePayload } from '../events/payloads.js';
import type { EventBus } from '../fabric/eventBus.js';
import { inboxPrefixOf } from '../fabric/replyInbox.js';
import type { LogFn } from '../log.js';
import { HandlerError } from './handlerApi.js';
import { AmfError } from '../errors.js';

export interface DelegationRequest {
  parentTaskId: string;
  traceId: string;
  tag: string;
  text: string;
  timeoutMs?: number;
  input?: Record<string, unknown>;
}

interface Waiter {
  resolve: (text: string) => void;
  reject: (err: Error) => void;
}

export class DelegationClient {
  private sub: Subscription | undefined;
  private readonly waiters = new Map<string, Waiter>();
  /** Where children's finals arrive: `<this connection's inbox>.delegation.<child task id>`. */
  private readonly inbox: string;

  constructor(
    private readonly bus: EventBus,
    private readonly agentId: string,
    /** Publishes the delegate event as this worker (the caller owns the sender). */
    private readonly publishDelegate: (
      parentTaskId: string,
      traceId: string,
      payload: DelegatePayload,
    ) => void,
    private readonly log?: LogFn,
  ) {
    this.inbox = `${inboxPrefixOf(bus.nc)}.delegation`;
  }

  /** Delegates and resolves with the child's result text; rejects on failure, denial or timeout. */
  delegate(request: DelegationRequest): Promise<string> {
    const childId = randomUUID();
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.forget(childId);
        reject(new AmfError('TIMEOUT', `delegated task ${childId} (${request.tag}) gave no result in time`));
      }, request.timeoutMs ?? 60_000);
      timer.unref();
      this.ensureSubscription();
      this.waiters.set(childId, {
        resolve: (t) => {
          clearTimeout(timer);
          resolve(t);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.publishDelegate(request.parentTaskId, request.traceId, {
        parent_task_id: request.parentTaskId,
        child_task_id: childId,
        agent_id: this.agentId,
        task: request.text,
        required_capability: request.tag,
        ...(request.input ? { input: request.input } : {}),
        reply_inbox: `${this.inbox}.${childId}`,
      });
    });
  }

  /** A terminal denial of a child task: its waiter fails with the denial's reason. */
  denied(taskId: string, reason: string, message: string): void {
    const waiter = this.waiters.get(taskId);
    if (!waiter) return;
    this.forget(taskId);
    waiter.reject(new HandlerError(reason, message));
  }

  /**
   * The worker listens on its delegation inbox only while it waits for a delegated task. The
   * subscription is registered before the delegate event is published on the same connection, so no
   * result can arrive unheard.
   */
  private ensureSubscription(): void {
    this.sub ??= this.bus.subscribe(`${this.inbox}.*`, (e, subject) => {
      const childId = subject.slice(this.inbox.length + 1);
      if (e.type === 'amf.result.final' && e.data.payload.task_id === childId) this.onFinal(e);
      else
        this.log?.('debug', 'ignored a message on the delegation inbox that is not the final of its child', {
          subject,
          type: e.type,
        });
    });
  }

  private forget(childId: string): void {
    this.waiters.delete(childId);
    if (this.waiters.size === 0 && this.sub) {
      this.sub.unsubscribe();
      this.sub = undefined;
    }
  }

  private onFinal(event: AmfEventOf<'amf.result.final'>): void {
    const p = event.data.payload;
    const waiter = this.waiters.get(p.task_id);
    if (!waiter) return;
    this.forget(p.task_id);
    if (p.status === 'completed' && typeof p.result?.text === 'string') waiter.resolve(p.result.text);
    else
      waiter.reject(
        new HandlerError(p.error?.code ?? 'delegation_failed', p.error?.message ?? 'delegated task failed'),
      );
  }
}
