/**
 * A worker's delegations: publishes `amf.task.delegate` for a child task and waits for the child's
 * final result. The coordinator decides whether the delegation is allowed (cycles, depth, policy); a
 * terminal `amf.policy.deny` for the child rejects the wait.
 */
import { randomUUID } from 'node:crypto';
import type { Subscription } from '@nats-io/transport-node';
import type { AmfEventOf } from '../events/cloudEvent.js';
import type { DelegatePayload } from '../events/payloads.js';
import type { EventBus } from '../fabric/eventBus.js';
import { HandlerError } from './handlerApi.js';

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

  constructor(
    private readonly bus: EventBus,
    private readonly agentId: string,
    /** Publishes the delegate event as this worker (the caller owns the sender). */
    private readonly publishDelegate: (
      parentTaskId: string,
      traceId: string,
      payload: DelegatePayload,
    ) => void,
  ) {}

  /** Delegates and resolves with the child's result text; rejects on failure, denial or timeout. */
  delegate(request: DelegationRequest): Promise<string> {
    const childId = randomUUID();
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.forget(childId);
        reject(new Error(`delegated task ${childId} (${request.tag}) gave no result in time`));
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
   * Final results are the busiest subject of the mesh: a worker listens to them only while it waits
   * for a delegated task. The subscription is registered before the delegate event is published on
   * the same connection, so no result can arrive unheard.
   */
  private ensureSubscription(): void {
    this.sub ??= this.bus.subscribe('amf.result.final', (e) => {
      if (e.type === 'amf.result.final') this.onFinal(e);
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
