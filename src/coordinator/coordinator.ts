/**
 * The coordinator runtime (`amf up`): brings up the fabric (spawned nats-server or an external one),
 * the shared stores, the policy engine (real OPA), the DMZ watcher, the admission pipeline with its
 * two doors (NATS heartbeats now, mDNS once the HTTP edge is listening), the task lifecycle and the
 * dispatcher. It knows nothing of HTTP; `http/coordinatorHttp.ts` serves it.
 */
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfConfig } from '../config/config.js';
import {
  largestTaskBodyBytes,
  largestTaskEventBytes,
  spawnedNatsMaxPayload,
} from '../config/payloadLimits.js';
import { createEvent, type EventSender } from '../events/cloudEvent.js';
import { connectAs, drainOrClose, RECONNECT_FOREVER } from '../fabric/connect.js';
import { acquireInstanceLock, type InstanceLock } from '../fabric/instanceLock.js';
import {
  loadOrCreateCredentials,
  loadOrCreateJoinCredential,
  type NatsCredentials,
  type RoleCredential,
} from '../fabric/credentials.js';
import { EventBus } from '../fabric/eventBus.js';
import { ensureFabricStores, type FabricStores } from '../fabric/jetstream.js';
import {
  superviseNatsServer,
  type NatsSupervisorEvent,
  type SupervisedNatsServer,
} from '../fabric/natsServer.js';
import { AdmissionPipeline, type AdmissionOutcome } from '../admission/admissionPipeline.js';
import { openIdentity } from '../identity/identityMode.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import { requestSvidProof } from '../identity/svidProof.js';
import { createSummarySealer, type SummaryVerification } from '../watcher/summarySigning.js';
import { createPolicyEngine } from '../policy/index.js';
import type { PolicyEngine } from '../policy/policyEngine.js';
import { DmzWatcher } from '../watcher/watcherPool.js';
import { pickLlmEnv } from '../watcher/llmScorer.js';
import { startWatcherService, type WatcherService } from '../watcher/watcherService.js';
import { MdnsDoor } from './mdnsDoor.js';
import { AgentRegistry } from '../registry/agentRegistry.js';
import { HeartbeatDoor } from './heartbeatAdmission.js';
import { PolicyNotices } from '../registry/policyNotices.js';
import { LeaderLease } from './leaderLease.js';
import { SharedState } from './sharedState.js';
import { TaskDispatcher } from './taskDispatcher.js';
import { TaskLifecycle } from './taskLifecycle.js';
import { ResultIntake } from './resultIntake.js';
import { adoptOrphanResult } from './orphanResults.js';
import { WorkQueueWriter } from '../fabric/workQueue.js';
import { EventAuthenticity } from './eventAuthenticity.js';
import { AgentGrants, permissionViolationReporter } from './agentGrants.js';
import type { PermissionViolation } from '../fabric/natsServer.js';
import type { LogFn } from '../log.js';

/** Key of the sweeper lease in the `amf_leases` bucket. */
export const SWEEPER_LEASE_KEY = 'sweeper';

export interface CoordinatorOptions {
  config: AmfConfig;
  /** Public URL of the coordinator's HTTP edge (used as the event source). */
  publicUrl?: string;
  log?: LogFn;
  /** Environment for identity mode and optional LLM risk scoring (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Observes every admission outcome (benchmarks, tests). */
  onAdmission?: (outcome: AdmissionOutcome) => void;
  /**
   * Told when the coordinator cannot go on (its spawned nats-server keeps dying). `amf up` exits
   * with the error; without this option the coordinator logs it and closes itself.
   */
  onFatal?: (err: Error) => void;
  /**
   * Keep the legacy shared `specialist` NATS user on the spawned server although legacy mode is
   * off (embedding code and tests whose agents connect with it). Without it, the user is there only
   * with `identity.legacy_unsigned_agents`.
   */
  legacySpecialistUser?: boolean;
}

/** How the fabric looks from this coordinator, for `/health` and `/metrics`. */
export interface FabricHealth {
  /** `degraded` while the NATS connection is down or the spawned server is being restarted. */
  status: 'ok' | 'degraded';
  connected: boolean;
  /** The spawned nats-server (absent with `--nats-url`). */
  server?: { pid: number; state: 'running' | 'restarting' | 'failed'; restarts: number };
}

interface AdmissionParts {
  policy: PolicyEngine;
  identity: IdentityProvider;
  connector: NatsConnection;
  watcherNc: NatsConnection;
  watcher: DmzWatcher;
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
  readonly admission: AdmissionPipeline;
  readonly policy: PolicyEngine;
  readonly identity: IdentityProvider;
  /**
   * Held by one coordinator of those sharing this NATS at a time: only its holder writes what its
   * sweeps decide into shared state (agents gone silent now; expiring tasks whose owner died is
   * meant to use it too). Every coordinator still sweeps its own registry for its own routing.
   */
  readonly sweeperLease: LeaderLease;
  private readonly heartbeatDoor: HeartbeatDoor;
  /** Whether an agent's event comes from the agent it names (signatures against admitted keys). */
  readonly authenticity: EventAuthenticity;
  /** The admitted agents' own NATS users (spawned nats-server only). */
  readonly grants: AgentGrants | undefined;
  private mdnsDoor: MdnsDoor | undefined;
  private readonly shared: SharedState;
  private readonly results: ResultIntake;
  private readonly work: WorkQueueWriter;
  private watcherService: WatcherService | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  /** Follows the connection's status events: nats.js reconnects by itself, this only tells the truth. */
  private connected = true;

  private constructor(
    readonly config: AmfConfig,
    readonly nc: NatsConnection,
    readonly natsUrl: string,
    readonly credentials: NatsCredentials,
    /** The join credential (`<data-dir>/join.json`): what a worker needs to be heard. */
    readonly joinCredential: RoleCredential,
    readonly stores: FabricStores,
    private readonly natsServer: SupervisedNatsServer | undefined,
    private readonly instanceLock: InstanceLock | undefined,
    private readonly parts: AdmissionParts,
    readonly log: LogFn,
    publicUrl: string,
    onAdmission: ((outcome: AdmissionOutcome) => void) | undefined,
  ) {
    const td = config.identity.trustDomain;
    this.policy = parts.policy;
    this.identity = parts.identity;
    this.sender = {
      // Under SPIFFE the coordinator is who its SVID says; otherwise a self-asserted id.
      identity: parts.identity.agentId ?? `spiffe://${td}/coordinator/${this.instanceId}`,
      source: publicUrl,
      role: 'coordinator',
      trustDomain: td,
    };
    this.bus = new EventBus(nc, {
      payloadHint: `HTTP bodies may be up to ${largestTaskBodyBytes(config)} bytes, which needs max_payload of at least ${largestTaskEventBytes(config)} bytes on the NATS server (or send less)`,
    });
    this.work = new WorkQueueWriter(nc, stores.jsm);
    this.notices = new PolicyNotices(this.bus, this.sender);
    this.registry = new AgentRegistry({
      defaultHeartbeatSeconds: config.heartbeat.intervalSeconds,
      offlineAfterMissed: config.heartbeat.offlineAfterMissed,
    });
    this.authenticity = new EventAuthenticity({
      registry: this.registry,
      notices: this.notices,
      acceptUnsignedFromKeylessAgents: config.identity.legacyUnsignedAgents,
    });
    const server = natsServer;
    this.grants = server
      ? new AgentGrants({
          registry: this.registry,
          reload: (agents) => server.reloadUsers({ join: joinCredential, agents }),
          log,
        })
      : undefined;
    this.lifecycle = new TaskLifecycle(this.bus, this.registry, this.sender, this.notices, {
      ttlSeconds: config.tasks.ttlSeconds,
      maxRetries: config.tasks.maxRetries,
      retryDelaySeconds: config.tasks.retryDelaySeconds,
      watchdogGraceFactor: config.tasks.watchdogGraceFactor,
      retainedTerminalTasks: config.tasks.retainedTerminalTasks,
      workerLossRetries: config.tasks.workerLossRetries,
      decideDelegation: (input) => parts.policy.delegation(input),
      // A stored result counts only when it is the agent's own (the results stream is one intake).
      storedResult: async (taskId) => {
        const event = await this.results.storedResult(taskId);
        return event && this.authenticity.accept(event, 'the results stream') ? event : undefined;
      },
      workQueue: this.work,
      authenticate: (event, intake) => this.authenticity.accept(event, intake),
    });
    this.dispatcher = new TaskDispatcher(this.bus, this.lifecycle, (event, intake) =>
      this.authenticity.accept(event, intake),
    );
    this.results = new ResultIntake({
      nc,
      jsm: stores.jsm,
      accept: (event, arrival) =>
        this.authenticity.accept(
          event,
          arrival.path === 'direct' ? 'the direct final subject' : 'the results stream',
        )
          ? this.lifecycle.acceptResult(event, arrival)
          : 'refused',
      adopt: async (event) =>
        this.authenticity.accept(event, 'the results stream')
          ? adoptOrphanResult(event, { tasks: stores.tasks, bus: this.bus, sender: this.sender, log })
          : 'ended',
      log: (level, message, fields) => log(level, message, fields),
    });
    this.admission = new AdmissionPipeline({
      registry: this.registry,
      notices: this.notices,
      policy: parts.policy,
      connector: parts.connector,
      coordinator: nc,
      trustDomain: td,
      identity: { mode: parts.identity.mode, svidVerified: parts.identity.svidVerified },
      mcpRequireTls: config.mcp.requireTls,
      integrityWarn: config.watcher.integrityWarn,
      ...spiffeAdmission(parts.identity),
      fetchCards: true,
      log,
      ...(onAdmission ? { onDecision: onAdmission } : {}),
    });
    this.heartbeatDoor = new HeartbeatDoor(
      this.bus,
      this.admission.denials,
      (raw) => this.admission.submit(raw),
      { registry: this.registry, authenticity: this.authenticity },
    );
    this.shared = new SharedState(
      stores.agents,
      stores.tasks,
      (what, err) =>
        log('warn', `shared state: ${what} failed`, {
          err: err instanceof Error ? err.message : String(err),
        }),
      100,
      (subject, bytes) => nc.publish(subject, bytes),
    );
    this.sweeperLease = new LeaderLease({
      kv: stores.leases,
      key: SWEEPER_LEASE_KEY,
      holderId: this.instanceId,
      // Losing a race or a NATS hiccup is routine for a lease: worth a debug line, not a warning.
      onError: (err) =>
        log('debug', 'sweeper lease attempt failed', {
          err: err instanceof Error ? err.message : String(err),
        }),
    });
  }

  /** Starts the fabric and the core services. */
  static async start(options: CoordinatorOptions): Promise<Coordinator> {
    const { config } = options;
    const env = options.env ?? process.env;
    const log: LogFn = options.log ?? (() => undefined);
    const identity = await openIdentity(config.identity.mode, env, { log });
    if (identity.warning) log('warn', identity.warning);
    if (identity.mode === 'spiffe') log('info', 'SPIFFE identity active', { spiffe_id: identity.agentId });
    let policy: PolicyEngine;
    try {
      policy = await createPolicyEngine({ opaUrl: config.policy.opaUrl, policyPath: config.policy.path });
    } catch (err) {
      await identity.close();
      throw err;
    }
    let natsServer: SupervisedNatsServer | undefined;
    let instanceLock: InstanceLock | undefined;
    let natsUrl = config.nats.url;
    const opened: NatsConnection[] = [];
    // Supervisor events can arrive before the coordinator exists; they go to it once it does.
    let onServerEvent: (event: NatsSupervisorEvent) => void = (event) => {
      if (event.kind === 'gave-up') log('error', event.error.message);
    };
    let onViolation: (violation: PermissionViolation) => void = () => undefined;
    try {
      const credentials = await loadOrCreateCredentials(config.dataDir);
      const joinCredential = await loadOrCreateJoinCredential(config.dataDir, env);
      if (!natsUrl) {
        // Before the server starts: two nats-servers must never open one JetStream directory.
        instanceLock = await acquireInstanceLock(config.dataDir);
        natsServer = await superviseNatsServer({
          dataDir: config.dataDir,
          credentials,
          port: config.nats.port,
          binary: config.nats.serverBinary,
          maxPayloadBytes: spawnedNatsMaxPayload(config),
          onEvent: (event) => onServerEvent(event),
          users: { join: joinCredential, agents: [] },
          // Seed workers connect with the shared specialist user: only legacy mode needs it.
          specialistUser: config.identity.legacyUnsignedAgents || options.legacySpecialistUser === true,
          onViolation: (violation) => onViolation(violation),
        });
        natsUrl = natsServer.url;
        await instanceLock.update({ nats_url: natsUrl });
        log('info', 'nats-server started', { url: natsUrl, pid: natsServer.pid });
      }
      const nc = await connectAs(natsUrl, credentials.coordinator, 'amf-coordinator', RECONNECT_FOREVER);
      opened.push(nc);
      const maxPayload = nc.info?.max_payload;
      if (maxPayload !== undefined && maxPayload < largestTaskEventBytes(config))
        log('warn', 'NATS max_payload is smaller than the HTTP body caps admit: larger tasks get 413', {
          max_payload: maxPayload,
          needed: largestTaskEventBytes(config),
        });
      // Each role of the admission path has its own connection, so NATS ACLs separate them.
      const connector = await connectAs(natsUrl, credentials.connector, 'amf-connector', RECONNECT_FOREVER);
      opened.push(connector);
      const watcherNc = await connectAs(natsUrl, credentials.watcher, 'amf-watcher', RECONNECT_FOREVER);
      opened.push(watcherNc);
      const watcher = new DmzWatcher({ llmEnv: pickLlmEnv(env) });
      const stores = await ensureFabricStores(
        nc,
        undefined,
        Math.max(3600, config.tasks.ttlSeconds * 10),
        config.nats.replicas,
      );
      const coordinator = new Coordinator(
        config,
        nc,
        natsUrl,
        credentials,
        joinCredential,
        stores,
        natsServer,
        instanceLock,
        { policy, identity, connector, watcherNc, watcher },
        log,
        options.publicUrl ?? config.coordinator.url,
        options.onAdmission,
      );
      onServerEvent = (event) => coordinator.onServerEvent(event, options.onFatal);
      onViolation = permissionViolationReporter(coordinator.registry, coordinator.notices);
      await coordinator.startServices();
      return coordinator;
    } catch (err) {
      await Promise.allSettled(opened.map((c) => c.close()));
      await natsServer?.close();
      await instanceLock?.release();
      await policy.close();
      await identity.close();
      throw err;
    }
  }

  /** Logs what the nats-server supervisor did; giving up ends the coordinator. */
  private onServerEvent(event: NatsSupervisorEvent, onFatal: ((err: Error) => void) | undefined): void {
    if (this.closing) return;
    switch (event.kind) {
      case 'exited':
        this.log('error', 'nats-server died; restarting it', { pid: event.pid, how: event.how });
        return;
      case 'restart-failed':
        this.log('warn', 'nats-server restart failed', { attempt: event.attempt, err: event.error.message });
        return;
      case 'restarted':
        this.log('info', 'nats-server restarted', { pid: event.pid, restarts: event.restarts });
        return;
      case 'gave-up':
        this.log('error', event.error.message);
        if (onFatal) onFatal(event.error);
        else void this.close();
        return;
    }
  }

  /** Tracks the coordinator connection's state from its status events (ends when it closes). */
  private watchConnection(): void {
    void (async () => {
      for await (const status of this.nc.status()) {
        if (status.type === 'disconnect') {
          this.connected = false;
          this.log('warn', 'NATS connection lost; reconnecting', { server: status.server });
        } else if (status.type === 'reconnect') {
          this.connected = true;
          this.log('info', 'NATS connection restored', { server: status.server });
        }
      }
    })().catch(() => undefined);
  }

  private async startServices(): Promise<void> {
    this.watchConnection();
    await this.shared.attachRegistry(
      this.registry,
      (change) =>
        this.sweeperLease.isHolder || !(change.kind === 'offline' && change.reason === 'heartbeat_missed'),
    );
    this.sweeperLease.onAcquired(() => {
      this.log('info', 'sweeper lease acquired', { instance: this.instanceId });
      void this.shared.reconcileOffline(this.registry);
    });
    this.sweeperLease.onLost((reason) => this.log('info', 'sweeper lease lost', { reason }));
    this.sweeperLease.start();
    this.shared.attachLifecycle(this.lifecycle);
    this.grants?.start();
    const { identity } = this.parts;
    this.watcherService = startWatcherService({
      nc: this.parts.watcherNc,
      watcher: this.parts.watcher,
      // Under SPIFFE each judged advertisement's summary is signed by a key its own SVID vouches for.
      ...(identity.mode === 'spiffe' && identity.agentId
        ? { seal: createSummarySealer(identity, identity.agentId) }
        : {}),
    });
    this.admission.start();
    this.heartbeatDoor.start();
    this.lifecycle.start();
    this.dispatcher.start();
    await this.results.start();
    this.registry.onChange((change) => {
      if (change.kind === 'offline') {
        this.log('info', 'agent offline', { agent: change.agent.record.agent_id, reason: change.reason });
        return;
      }
      // Not advertised to the mesh: an unverified agent is listed in /agents and offered nothing.
      if (change.kind === 'unverified') {
        this.log('warn', 'agent admitted unverified', {
          agent: change.agent.record.agent_id,
          reason: change.reason,
        });
        return;
      }
      this.log('info', `agent ${change.kind}`, {
        agent: change.agent.record.agent_id,
        tags: change.agent.record.capability_tags,
      });
      // The tag's work-queue consumer exists before the agent's first pull (not only at the first task).
      for (const tag of change.agent.record.capability_tags ?? [])
        this.work
          .ensureConsumer(tag)
          .catch((err: unknown) =>
            this.log('warn', 'work queue consumer not created', { tag, err: String(err) }),
          );
      this.bus.publish(
        createEvent({
          type: 'amf.discovery.capability.advertise',
          sender: this.sender,
          payload: { ...change.agent.record, admitted_at: change.agent.admittedAt, change: change.kind },
        }),
      );
    });
    this.sweepTimer = setInterval(() => this.registry.sweep(), 500);
    this.sweepTimer.unref();
    await Promise.all([this.nc.flush(), this.parts.watcherNc.flush(), this.parts.connector.flush()]);
  }

  /**
   * Opens the mDNS door once the HTTP edge knows its URL: browses `_amf-agent._tcp.local` into the
   * admission pipeline and advertises this coordinator so workers without `--coordinator` find it.
   */
  /** Names the coordinator by the URL its HTTP edge really bound (with port 0 the configured one ends in :0). */
  setPublicUrl(url: string): void {
    this.sender.source = url;
    // A second `amf up` on this data dir names this URL in its refusal.
    this.instanceLock?.update({ url }).catch(() => undefined);
  }

  async startDiscovery(publicUrl: string): Promise<void> {
    if (!this.config.mdns.enabled || this.mdnsDoor) return;
    this.mdnsDoor = await MdnsDoor.start({
      publicUrl,
      agentId: this.sender.identity,
      trustDomain: this.config.identity.trustDomain,
      ...(this.config.mdns.interface ? { interfaceAddress: this.config.mdns.interface } : {}),
      submit: (raw) => this.admission.submit(raw),
      onError: (err) =>
        this.log('warn', 'mDNS error', { err: err instanceof Error ? err.message : String(err) }),
    });
  }

  /** True while the NATS connection is usable (not closed, not between a disconnect and a reconnect). */
  get natsConnected(): boolean {
    return this.connected && !this.nc.isClosed();
  }

  /** The fabric as `/health` and `/metrics` report it. */
  get fabricHealth(): FabricHealth {
    const connected = this.natsConnected;
    const server = this.natsServer
      ? { pid: this.natsServer.pid, state: this.natsServer.state, restarts: this.natsServer.restarts }
      : undefined;
    const status = connected && (server === undefined || server.state === 'running') ? 'ok' : 'degraded';
    return { status, connected, ...(server ? { server } : {}) };
  }

  /** Stops everything this coordinator started; in-flight tasks end with a terminal event. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.sweepTimer);
      // Given back first, so another coordinator takes over the sweeps while this one drains.
      await this.sweeperLease.close().catch(() => undefined);
      await this.mdnsDoor?.close().catch(() => undefined);
      this.heartbeatDoor.close();
      this.grants?.close();
      this.admission.close();
      await this.results.close();
      this.dispatcher.close();
      this.lifecycle.close();
      await this.watcherService?.close().catch(() => undefined);
      await this.parts.watcher.close().catch(() => undefined);
      await this.shared.close().catch(() => undefined);
      // A drain waits for the server to confirm; with NATS unreachable it would wait forever.
      await Promise.allSettled(
        [this.nc, this.parts.connector, this.parts.watcherNc].map((c) => drainOrClose(c, DRAIN_TIMEOUT_MS)),
      );
      await this.natsServer?.close();
      await this.instanceLock?.release();
      await this.policy.close().catch(() => undefined);
      await this.identity.close().catch(() => undefined);
    })();
    return this.closing;
  }
}

const DRAIN_TIMEOUT_MS = 2_000;

/**
 * What admission checks under SPIFFE: signed watcher summaries (the watcher runs in this process,
 * so its SVID is the coordinator's own), and an SVID proof from every mesh/public advertiser.
 */
function spiffeAdmission(identity: IdentityProvider): {
  summaryVerification?: SummaryVerification;
  proveSvid?: (record: { agent_id: string; endpoint: string }) => ReturnType<typeof requestSvidProof>;
} {
  const own = identity.agentId;
  if (identity.mode !== 'spiffe' || !own) return {};
  return {
    summaryVerification: { identity, audience: own, signerAllowed: (id) => id === own },
    proveSvid: (record) =>
      requestSvidProof({ identity, agentId: record.agent_id, endpoint: record.endpoint }),
  };
}
