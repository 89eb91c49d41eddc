/**
 * The coordinator runtime (`amf up`): brings up the fabric (spawned nats-server or an external one),
 * the shared stores, the registry with heartbeat admission, the task lifecycle and the dispatcher.
 * It knows nothing of HTTP; `http/coordinatorHttp.ts` serves it.
 */
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfConfig } from '../config/config.js';
import type { EventSender } from '../events/cloudEvent.js';
import { connectAs } from '../fabric/connect.js';
import { loadOrCreateCredentials, type NatsCredentials } from '../fabric/credentials.js';
import { EventBus } from '../fabric/eventBus.js';
import { ensureFabricStores, type FabricStores } from '../fabric/jetstream.js';
import { startNatsServer, type NatsServerHandle } from '../fabric/natsServer.js';
import { AgentRegistry } from './agentRegistry.js';
import { HeartbeatAdmission } from './heartbeatAdmission.js';
import { PolicyNotices } from './policyNotices.js';
import { SharedState } from './sharedState.js';
import { TaskDispatcher } from './taskDispatcher.js';
import { TaskLifecycle } from './taskLifecycle.js';

export type CoordinatorLog = (
  level: 'debug' | 'info' | 'warn' | 'error',
  message: string,
  fields?: Record<string, unknown>,
) => void;

export interface CoordinatorOptions {
  config: AmfConfig;
  /** Public URL of the coordinator's HTTP edge (used as the event source). */
  publicUrl?: string;
  log?: CoordinatorLog;
}

/** A running coordinator core. */
export class Coordinator {
  readonly instanceId = randomUUID();
  readonly sender: EventSender;
  readonly bus: EventBus;
  readonly registry: AgentRegistry;
  readonly lifecycle: TaskLifecycle;
  readonly dispatcher: TaskDispatcher;
  readonly notices: PolicyNotices;
  private readonly admission: HeartbeatAdmission;
  private readonly shared: SharedState;
  private sweepTimer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;

  private constructor(
    readonly config: AmfConfig,
    readonly nc: NatsConnection,
    readonly natsUrl: string,
    readonly credentials: NatsCredentials,
    readonly stores: FabricStores,
    private readonly natsServer: NatsServerHandle | undefined,
    readonly log: CoordinatorLog,
    publicUrl: string,
  ) {
    const td = config.identity.trustDomain;
    this.sender = {
      identity: `spiffe://${td}/coordinator/${this.instanceId}`,
      source: publicUrl,
      role: 'coordinator',
      trustDomain: td,
    };
    this.bus = new EventBus(nc);
    this.notices = new PolicyNotices(this.bus, this.sender);
    this.registry = new AgentRegistry({
      defaultHeartbeatSeconds: config.heartbeat.intervalSeconds,
      offlineAfterMissed: config.heartbeat.offlineAfterMissed,
    });
    this.lifecycle = new TaskLifecycle(this.bus, this.registry, this.sender, this.notices, {
      ttlSeconds: config.tasks.ttlSeconds,
      maxRetries: config.tasks.maxRetries,
      retryDelaySeconds: config.tasks.retryDelaySeconds,
      watchdogGraceFactor: config.tasks.watchdogGraceFactor,
      maxDelegationDepth: config.tasks.maxDelegationDepth,
      retainedTerminalTasks: config.tasks.retainedTerminalTasks,
    });
    this.dispatcher = new TaskDispatcher(this.bus, this.lifecycle);
    this.admission = new HeartbeatAdmission(this.bus, this.registry, this.notices, this.sender);
    this.shared = new SharedState(stores.agents, stores.tasks, (what, err) =>
      log('warn', `shared state: ${what} failed`, { err: err instanceof Error ? err.message : String(err) }),
    );
  }

  /** Starts the fabric and the core services. */
  static async start(options: CoordinatorOptions): Promise<Coordinator> {
    const { config } = options;
    const log: CoordinatorLog = options.log ?? (() => undefined);
    const credentials = await loadOrCreateCredentials(config.dataDir);
    let natsServer: NatsServerHandle | undefined;
    let natsUrl = config.nats.url;
    if (!natsUrl) {
      natsServer = await startNatsServer({
        dataDir: config.dataDir,
        credentials,
        port: config.nats.port,
        binary: config.nats.serverBinary,
      });
      natsUrl = natsServer.url;
      log('info', 'nats-server started', { url: natsUrl, pid: natsServer.pid });
    }
    let nc: NatsConnection | undefined;
    try {
      nc = await connectAs(natsUrl, credentials.coordinator, 'amf-coordinator', { maxReconnectAttempts: -1 });
      const stores = await ensureFabricStores(nc, undefined, Math.max(3600, config.tasks.ttlSeconds * 10));
      const coordinator = new Coordinator(
        config,
        nc,
        natsUrl,
        credentials,
        stores,
        natsServer,
        log,
        options.publicUrl ?? config.coordinator.url,
      );
      await coordinator.startServices();
      return coordinator;
    } catch (err) {
      await nc?.close().catch(() => undefined);
      await natsServer?.close();
      throw err;
    }
  }

  private async startServices(): Promise<void> {
    await this.shared.attachRegistry(this.registry);
    this.shared.attachLifecycle(this.lifecycle);
    this.admission.start();
    this.lifecycle.start();
    this.dispatcher.start();
    this.registry.onChange((change) => {
      if (change.kind === 'offline')
        this.log('info', 'agent offline', { agent: change.agent.record.agent_id, reason: change.reason });
      else
        this.log('info', `agent ${change.kind}`, {
          agent: change.agent.record.agent_id,
          tags: change.agent.record.capability_tags,
        });
    });
    this.sweepTimer = setInterval(() => this.registry.sweep(), 500);
    this.sweepTimer.unref();
    await this.nc.flush();
  }

  /** True while the NATS connection is usable. */
  get natsConnected(): boolean {
    return !this.nc.isClosed();
  }

  /** Stops everything this coordinator started; in-flight tasks end with a terminal event. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.sweepTimer);
      this.admission.close();
      this.dispatcher.close();
      this.lifecycle.close();
      await this.shared.close().catch(() => undefined);
      await this.nc.drain().catch(() => undefined);
      await this.natsServer?.close();
    })();
    return this.closing;
  }
}
