/**
 * What the coordinator logs and announces as things happen around it: the nats-server supervisor's
 * events, its connection's state, and agents admitted, changed or gone (announced to the mesh as
 * `amf.discovery.capability.advertise`, with the tag's work-queue consumer made ready first).
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfConfig } from '../config/config.js';
import { largestTaskEventBytes } from '../config/payloadLimits.js';
import { createEvent, type EventSender } from '../events/cloudEvent.js';
import type { EventBus } from '../fabric/eventBus.js';
import type { NatsSupervisorEvent } from '../fabric/natsServer/supervisor.js';
import { parseServerVersion, slowStoreWarning } from '../fabric/natsServer/version.js';
import type { WorkQueueWriter } from '../fabric/workQueue.js';
import type { LogFn } from '../log.js';
import type { AgentRegistry } from '../registry/agentRegistry.js';

/** Logs what the nats-server supervisor did; giving up is fatal (`onFatal`). */
export function logServerEvent(event: NatsSupervisorEvent, log: LogFn, onFatal: (err: Error) => void): void {
  switch (event.kind) {
    case 'exited':
      log('error', 'nats-server died; restarting it', { pid: event.pid, how: event.how });
      return;
    case 'restart-failed':
      log('warn', 'nats-server restart failed', { attempt: event.attempt, err: event.error.message });
      return;
    case 'restarted':
      log('info', 'nats-server restarted', { pid: event.pid, restarts: event.restarts });
      return;
    case 'gave-up':
      log('error', event.error.message);
      onFatal(event.error);
      return;
  }
}

/**
 * Follows a connection's status events (ends when it closes): nats.js reconnects by itself, this
 * only tells the truth about it.
 */
export function watchConnection(
  nc: NatsConnection,
  log: LogFn,
  setConnected: (connected: boolean) => void,
): void {
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') {
        setConnected(false);
        log('warn', 'NATS connection lost; reconnecting', { server: status.server });
      } else if (status.type === 'reconnect') {
        setConnected(true);
        log('info', 'NATS connection restored', { server: status.server });
      }
    }
  })().catch(() => undefined);
}

export interface AgentChangeParts {
  registry: AgentRegistry;
  work: WorkQueueWriter;
  bus: EventBus;
  sender: EventSender;
  log: LogFn;
}

/** Logs every registry change and announces admitted and changed agents to the mesh. */
export function announceAgentChanges({ registry, work, bus, sender, log }: AgentChangeParts): void {
  registry.onChange((change) => {
    if (change.kind === 'offline') {
      log('info', 'agent offline', { agent: change.agent.record.agent_id, reason: change.reason });
      return;
    }
    // Not advertised to the mesh: a pending agent (mDNS hearsay) and an approved one that has not
    // connected yet are listed in /agents and offered nothing.
    if (change.kind === 'pending' || change.kind === 'approved') {
      log('info', `agent ${change.kind}`, { agent: change.agent.record.agent_id });
      return;
    }
    // Not advertised to the mesh: an unverified agent is listed in /agents and offered nothing.
    if (change.kind === 'unverified') {
      log('warn', 'agent admitted unverified', {
        agent: change.agent.record.agent_id,
        reason: change.reason,
      });
      return;
    }
    log('info', `agent ${change.kind}`, {
      agent: change.agent.record.agent_id,
      tags: change.agent.record.capability_tags,
    });
    // The tag's work-queue consumer exists before the agent's first pull (not only at the first task).
    for (const tag of change.agent.record.capability_tags ?? [])
      work
        .ensureConsumer(tag)
        .catch((err: unknown) => log('warn', 'work queue consumer not created', { tag, err: String(err) }));
    bus.publish(
      createEvent({
        type: 'amf.discovery.capability.advertise',
        sender,
        payload: { ...change.agent.record, admitted_at: change.agent.admittedAt, change: change.kind },
      }),
    );
  });
}

/** Warns when the server's max_payload is below what the HTTP body caps admit (larger tasks get 413). */
export function warnIfPayloadCapTooSmall(nc: NatsConnection, config: AmfConfig, log: LogFn): void {
  const maxPayload = nc.info?.max_payload;
  if (maxPayload !== undefined && maxPayload < largestTaskEventBytes(config))
    log('warn', 'NATS max_payload is smaller than the HTTP body caps admit: larger tasks get 413', {
      max_payload: maxPayload,
      needed: largestTaskEventBytes(config),
    });
}

/** Warns once at start when the NATS server is a release whose file store slows a long-running mesh. */
export function warnIfSlowNatsServer(nc: NatsConnection, log: LogFn): void {
  const version = parseServerVersion(nc.info?.version);
  const warning = version ? slowStoreWarning(version) : undefined;
  if (version && warning) log('warn', warning, { nats_server: version.join('.') });
}
