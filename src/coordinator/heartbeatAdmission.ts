/**
 * The NATS door of discovery: AgentRecords arriving as `amf.discovery.agent.heartbeat`. Each one is
 * validated (schema, identity matches the sender, visibility allowed for a static identity) before
 * the registry admits or refreshes the agent; a goodbye (`status: offline`) marks it offline.
 * Admission emits `amf.discovery.capability.advertise`.
 */
import type { Subscription } from '@nats-io/transport-node';
import { createEvent, type AmfEvent, type EventSender } from '../events/cloudEvent.js';
import { validateAgentRecord } from '../events/validateEvent.js';
import type { EventBus } from '../fabric/eventBus.js';
import type { AgentRegistry } from './agentRegistry.js';
import type { PolicyNotices } from './policyNotices.js';

export interface HeartbeatAdmissionOptions {
  /** Bounded memory for per-agent deny de-duplication. */
  maxRemembered?: number;
}

/** Judges heartbeats and keeps the registry current. */
export class HeartbeatAdmission {
  private sub: Subscription | undefined;
  /** Last deny reason per agent, so a misconfigured agent does not flood the fabric with denies. */
  private readonly lastDeny = new Map<string, string>();

  constructor(
    private readonly bus: EventBus,
    private readonly registry: AgentRegistry,
    private readonly notices: PolicyNotices,
    private readonly sender: EventSender,
    private readonly options: HeartbeatAdmissionOptions = {},
  ) {}

  start(): void {
    this.sub = this.bus.subscribe('amf.discovery.agent.heartbeat', (e) => this.onHeartbeat(e), {
      onInvalid: (errors) =>
        this.notices.deny({
          reason: 'advertisement_invalid',
          message: `heartbeat refused: ${errors.slice(0, 5).join('; ')}`,
        }),
    });
    this.registry.onChange((change) => {
      if (change.kind === 'admitted' || change.kind === 'changed' || change.kind === 'online') {
        this.bus.publish(
          createEvent({
            type: 'amf.discovery.capability.advertise',
            sender: this.sender,
            payload: { ...change.agent.record, admitted_at: change.agent.admittedAt, change: change.kind },
          }),
        );
      }
    });
  }

  close(): void {
    this.sub?.unsubscribe();
  }

  private deny(
    agentId: string,
    reason: 'advertisement_invalid' | 'visibility_requires_svid',
    message: string,
  ): void {
    if (this.lastDeny.get(agentId) === message) return;
    if (this.lastDeny.size >= (this.options.maxRemembered ?? 10_000)) this.lastDeny.clear();
    this.lastDeny.set(agentId, message);
    this.notices.deny({ reason, message, agent_id: agentId });
  }

  private onHeartbeat(event: AmfEvent): void {
    const result = validateAgentRecord(event.data.payload);
    const claimedId = (event.data.payload as { agent_id?: unknown }).agent_id;
    const agentKey = typeof claimedId === 'string' ? claimedId.slice(0, 512) : event.source;
    if (!result.ok) {
      this.deny(
        agentKey,
        'advertisement_invalid',
        `advertisement of ${agentKey} refused: ${result.errors.slice(0, 5).join('; ')}`,
      );
      return;
    }
    const record = result.value;
    if (event.data.auth_context.identity !== record.agent_id) {
      this.deny(
        agentKey,
        'advertisement_invalid',
        `advertisement refused: sender identity ${event.data.auth_context.identity} does not match agent_id ${record.agent_id}`,
      );
      return;
    }
    // Static identities are local-only (LOCKED #3a): mesh/public need a verified SVID.
    const visibility = record.visibility ?? 'local';
    if (visibility !== 'local' && event.data.auth_context.svid_verified !== true) {
      this.deny(
        agentKey,
        'visibility_requires_svid',
        `advertisement of ${record.agent_id} refused: visibility "${visibility}" requires a verified SVID; static identities are local only`,
      );
      return;
    }
    if (record.status === 'offline') {
      this.registry.markOffline(record.agent_id, 'goodbye');
      return;
    }
    this.lastDeny.delete(record.agent_id);
    this.registry.admit(record);
  }
}
