/**
 * What coordinators tell a worker on the public fabric (specialists cannot read amf.internal.>):
 * cancellations, terminal denials, and the operator disabling or enabling it; and on the worker's own subject, which no other agent can read,
 * the follow-up input of the tasks it holds. Only coordinators may publish these (NATS ACLs); the
 * role check here is the second line. Delegation results come on a subscription of their
 * own, only while delegations are pending (delegationClient.ts).
 */
import type { Subscription } from '@nats-io/transport-node';
import type { EventBus } from '../fabric/eventBus.js';
import { agentInputSubject } from '../fabric/agentUsers.js';
import type { FollowUpMessage } from './handlerApi.js';
import type { AmfEvent } from '../events/cloudEvent.js';
import { checkEventSignature } from '../identity/eventSignature.js';

export interface OrderTaker {
  agentId: string;
  /** The agent's nkey: follow-ups come on its own subject (`amf.agent.<nkey>.input`), unread by others. */
  agentKey: string;
  /** Stops the handler of `taskId` if it runs here. */
  abort: (taskId: string) => void;
  /** Hands a follow-up to a handler waiting for input. */
  deliverInput: (taskId: string, message: FollowUpMessage) => void;
  /** A delegation of this worker's was denied. */
  denied: (taskId: string, reason: string, message: string) => void;
  /** The operator disabled this agent (stop pulling work) or enabled it again. */
  switched?: (disabled: boolean) => void;
  /**
   * The coordinator's public key (from the data dir, or the invite): when known, an order counts
   * only when that key signed it (coordinator/signedOrders.ts); when not, the role check alone.
   */
  coordinatorKey?: string;
}

/** True when `e` comes from a coordinator: its role, and its key's signature when the key is known. */
function fromCoordinator(e: AmfEvent, coordinatorKey: string | undefined): boolean {
  if (e.amfagentrole !== 'coordinator') return false;
  if (coordinatorKey === undefined) return true;
  const signature = checkEventSignature(e);
  return signature.ok && signature.signer === coordinatorKey;
}

export function subscribeToOrders(bus: EventBus, worker: OrderTaker): Subscription[] {
  return [
    bus.subscribe('amf.policy.deny', (e) => {
      if (e.type !== 'amf.policy.deny' || !fromCoordinator(e, worker.coordinatorKey)) return;
      const p = e.data.payload;
      if (!p.terminal || typeof p.task_id !== 'string') return;
      worker.abort(p.task_id);
      worker.denied(p.task_id, p.reason, p.message);
    }),
    bus.subscribe('amf.task.cancel', (e) => {
      if (e.type !== 'amf.task.cancel' || !fromCoordinator(e, worker.coordinatorKey)) return;
      const { task_id: taskId, agent_id: agentId } = e.data.payload;
      // A cancel naming an agent (the claimant, or a claim that lost) is for that agent only.
      if (agentId !== undefined && agentId !== worker.agentId) return;
      if (typeof taskId === 'string') worker.abort(taskId);
    }),
    // Disabled by the operator (or told so when a claim of it was refused): no new work until
    // enabled. The coordinator signs these warnings like its other orders (signedOrders.ts).
    bus.subscribe('amf.policy.warning', (e) => {
      if (e.type !== 'amf.policy.warning' || !worker.switched) return;
      const p = e.data.payload;
      if (p.agent_id !== worker.agentId || !fromCoordinator(e, worker.coordinatorKey)) return;
      if (p.reason === 'agent_disabled' || p.reason === 'claim_from_disabled_agent') worker.switched(true);
      else if (p.reason === 'agent_enabled') worker.switched(false);
    }),
    bus.subscribe(agentInputSubject(worker.agentKey), (e) => {
      if (e.type !== 'amf.task.input' || !fromCoordinator(e, worker.coordinatorKey)) return;
      const p = e.data.payload;
      if (p.agent_id !== worker.agentId || typeof p.task_id !== 'string' || typeof p.text !== 'string')
        return;
      const data =
        typeof p.data === 'object' && p.data !== null && !Array.isArray(p.data) ? p.data : undefined;
      worker.deliverInput(p.task_id, {
        text: p.text,
        ...(data ? { data } : {}),
        ...(typeof p.message_id === 'string' ? { messageId: p.message_id } : {}),
      });
    }),
  ];
}
