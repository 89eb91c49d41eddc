/**
 * The NATS door of discovery: AgentRecords arriving as `amf.discovery.agent.heartbeat`. Each is
 * checked against the schema and the sender's identity, signed with its key and fresh (a replayed
 * heartbeat or goodbye is refused and warned: tasks/eventAuthenticity.ts), then mapped to the same
 * TXT keys an mDNS record carries and handed to the admission pipeline, which judges it like any
 * advertisement. This is the proven door: only a holder of the data dir's join credential or of an
 * enrolled key's own login can publish here, so what it passes on may make an agent live, bind its
 * key, move its endpoint or take it offline — which mDNS never may (admissionPipeline.ts).
 */
import { randomUUID } from 'node:crypto';
import type { Subscription } from '@nats-io/transport-node';
import type { AmfEvent } from '../events/cloudEvent.js';
import type { AdvertisementRef } from '../events/payloads.js';
import { validateAgentRecord } from '../events/validateEvent.js';
import type { EventBus } from '../fabric/eventBus.js';
import type { RawAdvertisement } from '../discovery/advertisement.js';
import { agentRecordToTxt } from '../discovery/txtRecord.js';
import type { DenialReporter } from '../admission/denialReporter.js';
import { checkEventSignature } from '../identity/eventSignature.js';
import type { AgentRegistry } from '../registry/agentRegistry.js';
import type { EventAuthenticity } from './tasks/eventAuthenticity.js';

/** What the door needs to bind heartbeats to keys (absent: unit tests of the door alone). */
export interface HeartbeatBinding {
  registry: AgentRegistry;
  authenticity: EventAuthenticity;
}

/** Wire size of TXT pairs as length-prefixed `key=value` strings (what mDNS would carry). */
export function txtWireSize(txt: Record<string, string>): number {
  let size = 0;
  for (const [k, v] of Object.entries(txt)) size += 1 + Buffer.byteLength(`${k}=${v}`);
  return size;
}

export class HeartbeatDoor {
  private sub: Subscription | undefined;
  constructor(
    private readonly bus: EventBus,
    private readonly denials: DenialReporter,
    private readonly submit: (raw: RawAdvertisement) => void,
    private readonly binding?: HeartbeatBinding,
  ) {}

  start(): void {
    this.sub = this.bus.subscribe('amf.discovery.agent.heartbeat', (e) => this.onHeartbeat(e), {
      onInvalid: (errors) => this.deny('unknown', `heartbeat refused: ${errors.slice(0, 5).join('; ')}`),
    });
  }

  close(): void {
    this.sub?.unsubscribe();
  }

  private deny(agentKey: string, message: string, event?: AmfEvent): void {
    // Named by who sent it and where it claims to live, even when it has no usable agent_id.
    const endpoint = (event?.data.payload as { endpoint?: unknown } | undefined)?.endpoint;
    const advertisement: AdvertisementRef = {
      door: 'nats',
      source: event ? `nats:${event.data.auth_context.identity.slice(0, 256)}` : 'nats:unknown',
      ...(typeof endpoint === 'string' && endpoint !== '' ? { endpoint: endpoint.slice(0, 256) } : {}),
    };
    this.denials.deny(`nats|${agentKey}|${message}`, {
      reason: 'advertisement_invalid',
      message,
      agent_id: agentKey,
      advertisement,
      details: { door: 'nats' },
    });
  }

  /**
   * A heartbeat of an agent id bound to a key must be signed with that key and fresh — live, offline
   * or gone from the list, until an operator forgets it — so nobody else can mark it offline, change
   * its advertisement or take its id over, and nobody can replay its old heartbeats or goodbye; an
   * advertisement naming a key must be signed by it (proof of possession, before the key is bound)
   * and fresh. An offline agent admitted without a key may come back with one: it is then judged
   * again as a changed advertisement. A `pending` listing (mDNS hearsay) binds nothing here.
   */
  private boundToKey(event: AmfEvent, agentId: string, nkey: string | undefined, agentKey: string): boolean {
    if (!this.binding) return true;
    const listed = this.binding.registry.get(agentId);
    const known = listed?.status === 'pending' ? undefined : listed;
    const bound = this.binding.registry.boundKey(agentId);
    const keylessComingBack = bound === undefined && known?.status === 'offline';
    const keylessStaysKeyless = bound === undefined && nkey === undefined;
    const checkedAsBound = (known || bound !== undefined) && !keylessComingBack && !keylessStaysKeyless;
    // The bound key's signature and the event's freshness (tasks/eventAuthenticity.ts).
    if (checkedAsBound && !this.binding.authenticity.accept(event, 'the heartbeat door')) return false;
    if (nkey === undefined) return true;
    const signature = checkEventSignature(event);
    if (!signature.ok || signature.signer !== nkey) {
      this.deny(
        agentKey,
        `advertisement of ${agentKey} refused: it names key ${nkey} but is ${signature.ok ? `signed by ${signature.signer}` : signature.reason.replace('_', ' ')}`,
        event,
      );
      return false;
    }
    return checkedAsBound || this.binding.authenticity.acceptFresh(event, nkey, 'the heartbeat door');
  }

  private onHeartbeat(event: AmfEvent): void {
    const payload = event.data.payload as { agent_id?: unknown };
    const agentKey =
      typeof payload.agent_id === 'string' ? payload.agent_id.slice(0, 256) : event.source.slice(0, 256);
    const result = validateAgentRecord(event.data.payload);
    if (!result.ok) {
      this.deny(
        agentKey,
        `advertisement of ${agentKey} refused: ${result.errors.slice(0, 5).join('; ')}`,
        event,
      );
      return;
    }
    const record = result.value;
    // On NATS the sender is known: an agent may only advertise itself.
    if (event.data.auth_context.identity !== record.agent_id) {
      this.deny(
        agentKey,
        `advertisement refused: sender identity ${event.data.auth_context.identity} does not match agent_id ${record.agent_id}`,
        event,
      );
      return;
    }
    if (!this.boundToKey(event, record.agent_id, record.nkey, agentKey)) return;
    let txt: Record<string, string>;
    try {
      txt = agentRecordToTxt(record);
    } catch (err) {
      this.deny(agentKey, `advertisement of ${agentKey} refused: ${(err as Error).message}`, event);
      return;
    }
    const raw: RawAdvertisement = {
      raw_id: randomUUID(),
      door: 'nats',
      source: `nats:${event.data.auth_context.identity.slice(0, 256)}`,
      received_at: new Date().toISOString(),
      txt,
      txt_bytes: txtWireSize(txt),
    };
    if (record.heartbeat_seconds !== undefined) raw.heartbeat_seconds = record.heartbeat_seconds;
    if (record.status === 'offline') raw.goodbye = true;
    this.submit(raw);
  }
}
