/**
 * The coordinator runtime (`amf up`): brings up the fabric (a spawned nats-server with its auth
 * callout, or an external one), the shared stores, the identity (SPIFFE or static), the policy engine
 * (real OPA), the DMZ watcher, the admission pipeline with its two doors (NATS heartbeats now, mDNS
 * once the HTTP edge is listening) and the task path. Several coordinators can share one fabric: the
 * holder of a leader lease runs the mesh-wide sweeps. It knows nothing of HTTP nor of the protocol
 * adapters: `startCoordinatorRuntime` (apps/coordinatorRuntime.ts) adds the federated MCP catalog,
 * and `startCoordinatorHttp` (apps/coordinatorApp.ts) serves both.
 */
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfConfig } from '../config/config.js';
import { largestTaskBodyBytes, largestTaskEventBytes } from '../config/payloadLimits.js';
import type { EventSender } from '../events/cloudEvent.js';
import { connectAs, drainOrClose, RECONNECT_FOREVER } from '../fabric/connect.js';
import type { InstanceLock } from '../fabric/instanceLock.js';
import {
  loadOrCreateCredentials,
  loadOrCreateJoinCredential,
  type NatsCredentials,
  type RoleCredential,
} from '../fabric/credentials.js';
import { EventBus } from '../fabric/eventBus.js';
import { ensureFabricStores, type FabricStores } from '../fabric/jetstream.js';
import type {
  NatsSupervisorEvent,
  PermissionViolation,
  SupervisedNatsServer,
} from '../fabric/natsServer/supervisor.js';
import { spawnCoordinatorNats } from './spawnedNats.js';
import { startCalloutFor } from './calloutWiring.js';
import { followServerLogs } from './serverLogViolations.js';
import { AdmissionPipeline, type AdmissionOutcome } from '../admission/admissionPipeline.js';
import { openIdentity } from '../identity/identityMode.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import { createSummarySealer } from '../watcher/summarySigning.js';
import { createPolicyEngine } from '../policy/index.js';
import type { PolicyEngine } from '../policy/policyEngine.js';
import { DmzWatcher } from '../watcher/watcherPool.js';
import { pickLlmEnv } from '../watcher/llmScorer.js';
import { startWatcherService, type WatcherService } from '../watcher/watcherService.js';
import { MdnsDoor } from './mdnsDoor.js';
import { AgentRegistry } from '../registry/agentRegistry.js';
import { HeartbeatDoor } from './heartbeatAdmission.js';
import { PolicyNotices } from '../registry/policyNotices.js';
import { SWEEPER_LEASE_KEY, type LeaderLease } from './leaderLease.js';
import { SweeperDuties } from './sweeperDuties.js';
import { SharedState } from './sharedState.js';
import { readAgentFromLeader, SharedLiveness } from './sharedLiveness.js';
import type { TaskDispatcher } from './tasks/dispatcher.js';
import type { TaskLifecycle } from './tasks/lifecycle.js';
import type { ResultIntake } from './tasks/resultIntake.js';
import { closeTaskPath, createTaskPath } from './tasks/path.js';
import { MeshTaskService, type TaskService } from './tasks/taskService.js';
import {
  announceAgentChanges,
  logServerEvent,
  warnIfPayloadCapTooSmall,
  warnIfSlowNatsServer,
  watchConnection,
} from './coordinatorEvents.js';
import { spiffeAdmission } from './spiffeAdmission.js';
import { fabricHealthOf, type CoordinatorOptions, type FabricHealth } from './coordinatorOptions.js';
import { WorkQueueWriter } from '../fabric/workQueue.js';
import { ReplyInbox } from '../fabric/replyInbox.js';
import type { EventAuthenticity } from './tasks/eventAuthenticity.js';
import { AgentGrants, permissionViolationReporter } from './agentGrants.js';
import { EnrollmentStore } from './enrollmentStore.js';
import { DisablementStore } from './disablementStore.js';
import type { Disablement } from '../registry/disablements.js';
import { signOrders } from './signedOrders.js';
import type { Enrollment, EnrollmentRequest } from '../registry/enrollments.js';
import type { RegisteredAgent } from '../registry/agentRegistry.js';
import { ArtifactIntake } from './artifactIntake.js';
import type { TaskEventIntake } from './tasks/eventIntake.js';
import type { LogFn } from '../log.js';
import type { AgentKey } from '../identity/agentKey.js';
import { loadOrCreateCoordinatorKey } from '../identity/coordinatorKey.js';
import { advertisedUrl } from '../net/advertisedHost.js';
import { formatBytes, storeBudget, type StoreBudget } from '../fabric/natsServer/storeBudget.js';
import { NatsServerLog } from './natsServerLog.js';
import { StoreIntegrity, storeHealthWithLosses } from './storeIntegrity.js';
import { FabricCondition } from './fabricCondition.js';
import { AmfError } from '../errors.js';
import { watchForgottenAgents, type AgentForgetWatch } from './agentForgetWatch.js';

export { SWEEPER_LEASE_KEY };
export type { CoordinatorOptions, FabricHealth };

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
  /** What requesters use (the protocol adapters and operator routes): the dispatcher and lifecycle behind one port. */
  readonly tasks: TaskService;
  readonly notices: PolicyNotices;
  readonly admission: AdmissionPipeline;
  readonly policy: PolicyEngine;
  readonly identity: IdentityProvider;
  /** The lease and the mesh-wide sweeps of its holder (sweeperDuties.ts). */
  readonly sweeper: SweeperDuties;
  readonly sweeperLease: LeaderLease;
  private readonly heartbeatDoor: HeartbeatDoor;
  /** Whether an agent's event comes from the agent it names (signatures against admitted keys). */
  readonly authenticity: EventAuthenticity;
  /** The admitted agents' own NATS users (spawned nats-server only). */
  readonly grants: AgentGrants | undefined;
  /** Enrolled keys (approvals, invites), kept in the shared `amf_enrollments` bucket. */
  readonly enrollments: EnrollmentStore;
  /** Agents the operator disabled, kept in the shared `amf_disabled_agents` bucket. */
  private readonly disablements: DisablementStore;
  private mdnsDoor: MdnsDoor | undefined;
  private readonly shared: SharedState;
  /** The shared registry's word on agents this coordinator gave up for silence (sharedLiveness.ts). */
  readonly liveness: SharedLiveness;
  private readonly results: ResultIntake;
  /** Agents' artifacts and evidence: checked, held to each agent's quota, then published. */
  readonly artifacts: ArtifactIntake;
  /** Agents' task events, taken from their own subjects and recorded within their quotas. */
  readonly taskEvents: TaskEventIntake;
  private readonly work: WorkQueueWriter;
  private watcherService: WatcherService | undefined;
  /** Agents forgotten through another coordinator (their shared entry deleted) are forgotten here too. */
  private forgetWatch: AgentForgetWatch | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** Set once close() has begun. */
  closing: Promise<void> | undefined;
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
    /** Signs the bearers it shows at worker edges and the invites (identity/coordinatorKey.ts). */
    readonly signingKey: AgentKey,
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
      // Cancellations, denials and follow-ups carry the coordinator's signature (signedOrders.ts).
      sign: signOrders(signingKey),
      payloadHint: `HTTP bodies may be up to ${largestTaskBodyBytes(config)} bytes, which needs max_payload of at least ${largestTaskEventBytes(config)} bytes on the NATS server (or send less)`,
    });
    this.work = new WorkQueueWriter(nc, stores.jsm);
    const spawned = natsServer;
    this.condition = new FabricCondition({
      nc,
      log,
      serverStore: () => this.serverLog?.storeHealth(),
      ...(spawned
        ? {
            dataDir: config.dataDir,
            // The supervisor starts a killed server again on the same port and store.
            restartServer: () => {
              try {
                process.kill(spawned.pid, 'SIGKILL');
              } catch {
                // gone already: the supervisor restarts it anyway
              }
            },
          }
        : {}),
    });
    this.notices = new PolicyNotices(this.bus, this.sender);
    this.registry = new AgentRegistry({
      defaultHeartbeatSeconds: config.heartbeat.intervalSeconds,
      offlineAfterMissed: config.heartbeat.offlineAfterMissed,
    });
    const server = natsServer;
    this.grants = server
      ? new AgentGrants({
          registry: this.registry,
          reload: (agents) => server.reloadUsers({ join: joinCredential, agents }),
          log,
        })
      : undefined;
    this.enrollments = new EnrollmentStore(stores.enrollments, this.registry, log);
    this.disablements = new DisablementStore(stores.disabledAgents, this.registry, log);
    this.shared = new SharedState(
      stores.agents,
      stores.tasks,
      (what, err) => log('warn', `shared state: ${what} failed`, { err: String(err) }),
      100,
      (subject, bytes) => nc.publish(subject, bytes),
      this.instanceId,
      ReplyInbox.of(nc),
    );
    this.liveness = new SharedLiveness({
      registry: this.registry,
      readShared: (agentId) => readAgentFromLeader(stores.jsm, agentId),
      // Read when asked, once the lease and the task path below exist.
      isHolder: () => this.sweeperLease.isHolder,
      connected: () => this.natsConnected,
      onReturn: (agents) => void this.lifecycle.takeStoredResults(agents),
      log,
    });
    const path = createTaskPath({
      liveness: this.liveness,
      nc,
      jsm: stores.jsm,
      tasksKv: stores.tasks,
      bus: this.bus,
      work: this.work,
      registry: this.registry,
      notices: this.notices,
      sender: this.sender,
      config,
      policy: parts.policy,
      readTaskState: (taskId) => this.shared.readTask(taskId),
      log,
      refuseNewTask: (tagServed) => this.condition.refuseNewTask(tagServed),
    });
    this.authenticity = path.authenticity;
    this.lifecycle = path.lifecycle;
    this.dispatcher = path.dispatcher;
    this.tasks = new MeshTaskService({
      dispatcher: this.dispatcher,
      lifecycle: this.lifecycle,
      input: { bus: this.bus, sender: this.sender, registry: this.registry },
    });
    this.results = path.results;
    this.taskEvents = path.taskEvents;
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
    this.sweeper = new SweeperDuties({
      stores,
      instanceId: this.instanceId,
      registry: this.registry,
      notices: this.notices,
      shared: this.shared,
      defaultTtlSeconds: config.tasks.ttlSeconds,
      joinPassword: joinCredential.password,
      log,
    });
    this.sweeperLease = this.sweeper.lease;
    this.artifacts = new ArtifactIntake({
      nc,
      registry: this.registry,
      notices: this.notices,
      limits: config.artifacts,
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
    // The spawned server's own errors: logged at their level, its store's state kept for /health.
    const serverLog = new NatsServerLog(log);
    let startedWatcher: DmzWatcher | undefined;
    // Supervisor events can arrive before the coordinator exists; they go to it once it does.
    let onServerEvent: (event: NatsSupervisorEvent) => void = (event) => {
      if (event.kind === 'gave-up') log('error', event.error.message);
    };
    let onViolation: (violation: PermissionViolation) => void = () => undefined;
    try {
      const credentials = await loadOrCreateCredentials(config.dataDir);
      const joinCredential = await loadOrCreateJoinCredential(config.dataDir, env);
      const signingKey = await loadOrCreateCoordinatorKey(config.dataDir);
      if (!natsUrl) {
        const spawned = await spawnCoordinatorNats({
          serverLines: (line) => serverLog.line(line),
          config,
          credentials,
          join: joinCredential,
          specialistUser: config.identity.legacyUnsignedAgents || options.legacySpecialistUser === true,
          onEvent: (event) => onServerEvent(event),
          onViolation: (violation) => onViolation(violation),
          log,
        });
        ({ server: natsServer, lock: instanceLock, url: natsUrl } = spawned);
      }
      const nc = await connectAs(natsUrl, credentials.coordinator, 'amf-coordinator', RECONNECT_FOREVER);
      opened.push(nc);
      const callout = await startCalloutFor({
        nc,
        natsUrl,
        config,
        env,
        credentials,
        join: joinCredential,
        log,
      });
      warnIfPayloadCapTooSmall(nc, config, log);
      warnIfSlowNatsServer(nc, log);
      // Each role of the admission path has its own connection, so NATS ACLs separate them.
      const connector = await connectAs(natsUrl, credentials.connector, 'amf-connector', RECONNECT_FOREVER);
      opened.push(connector);
      const watcherNc = await connectAs(natsUrl, credentials.watcher, 'amf-watcher', RECONNECT_FOREVER);
      opened.push(watcherNc);
      const watcher = new DmzWatcher({ llmEnv: pickLlmEnv(env) });
      startedWatcher = watcher;
      const artifactLimits = { ...config.artifacts, maxMessageBytes: config.artifacts.maxEventBytes };
      // A spawned server's store is on this machine's disk: size what it reserves from its free space.
      const budget =
        natsServer || config.nats.storeMaxBytes !== null
          ? await storeBudget(config.dataDir, config.nats.storeMaxBytes, config.history, artifactLimits)
          : undefined;
      if (budget)
        log(
          budget.scale < 1 ? 'warn' : 'info',
          `JetStream store: reserving ${formatBytes(budget.reserved)}`,
          {
            ...(budget.free !== undefined ? { free: formatBytes(budget.free) } : {}),
            source: budget.source,
            ...(budget.scale < 1
              ? { note: 'below the default sizes: streams keep less history (nats.store_max_bytes sets it)' }
              : {}),
          },
        );
      const stores = await ensureFabricStores(
        nc,
        config.history,
        Math.max(3600, config.tasks.ttlSeconds * 10),
        config.nats.replicas,
        artifactLimits,
        budget?.scale ?? 1,
      ).catch((err: unknown) => {
        throw explainStoreFailure(err, config.dataDir, budget);
      });
      // Before anything new is stored: what the store lost since it was last seen (storeIntegrity.ts).
      const integrity = new StoreIntegrity({
        jsm: stores.jsm,
        tasks: stores.tasks,
        dataDir: config.dataDir,
        log,
      });
      await integrity.check();
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
        signingKey,
      );
      coordinator.serverLog = serverLog;
      coordinator.storeIntegrity = integrity.start();
      onServerEvent = (event) => {
        if (coordinator.closing) return;
        logServerEvent(event, log, options.onFatal ?? (() => void coordinator.close()));
      };
      onViolation = permissionViolationReporter(coordinator.registry, coordinator.notices);
      void followServerLogs(config.nats.url ? config.nats.serverLogs : [], onViolation, log, nc.closed());
      callout?.attach(coordinator);
      await coordinator.startServices();
      return coordinator;
    } catch (err) {
      // Everything started so far is stopped: a start that failed must let the process exit.
      await startedWatcher?.close().catch(() => undefined);
      await Promise.allSettled(opened.map((c) => c.close()));
      await natsServer?.close();
      await instanceLock?.release();
      await policy.close();
      await identity.close();
      throw err;
    }
  }

  private async startServices(): Promise<void> {
    this.liveness.start();
    watchConnection(this.nc, this.log, (connected) => {
      const back = connected && !this.connected;
      this.connected = connected;
      this.condition.setConnected(connected);
      // Back from an outage: what this coordinator decided alone meanwhile is checked against the
      // shared state before it refuses anyone (sharedLiveness.ts).
      if (back) this.liveness.refresh('all');
    });
    this.condition.start();
    await this.shared.attachRegistry(this.registry, (change) => this.sweeper.mirrors(change));
    this.sweeper.start();
    this.shared.attachLifecycle(this.lifecycle);
    await this.enrollments.start();
    await this.disablements.start();
    this.forgetWatch = await watchForgottenAgents(this.stores.agents, this.registry, this.log);
    this.remindDisabledAgents();
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
    this.artifacts.start();
    this.taskEvents.start();
    const { registry, work, bus, sender, log } = this;
    announceAgentChanges({ registry, work, bus, sender, log });
    this.sweepTimer = setInterval(() => this.registry.sweep(), 500);
    this.sweepTimer.unref();
    await Promise.all([this.nc.flush(), this.parts.watcherNc.flush(), this.parts.connector.flush()]);
  }

  /**
   * A disabled agent that joins or comes back is told again that it is disabled (it may have
   * restarted and forgotten): it then pulls no work, rather than taking offers only to pass them on.
   */
  private remindDisabledAgents(): void {
    this.registry.onChange((change) => {
      if (change.kind !== 'admitted' && change.kind !== 'online' && change.kind !== 'changed') return;
      const id = change.agent.record.agent_id;
      const disablement = this.registry.disablement(id);
      if (!disablement) return;
      this.notices.warn({
        reason: 'agent_disabled',
        message: `agent ${id} is disabled (by the ${disablement.by} at ${disablement.disabled_at}): it gets no new work until it is enabled`,
        agent_id: id,
        details: { by: disablement.by, disabled_at: disablement.disabled_at, reminder: true },
      });
    });
  }

  /** Names the coordinator by the URL its HTTP edge really bound (with port 0 the configured one ends in :0). */
  setPublicUrl(url: string): void {
    this.sender.source = url;
    // A second `amf up` on this data dir names this URL in its refusal.
    this.instanceLock?.update({ url }).catch(() => undefined);
  }

  /**
   * Opens the mDNS door once the HTTP edge knows its URL: browses `_amf-agent._tcp.local` into the
   * admission pipeline and advertises this coordinator so workers without `--coordinator` find it.
   */
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

  /**
   * The NATS URL other machines should dial (the card's `nats_url`, invites): the spawned server's
   * wildcard bind replaced by this machine's LAN address; an external URL as configured.
   */
  get advertisedNatsUrl(): string {
    if (this.config.nats.url) return this.natsUrl;
    return advertisedUrl(this.natsUrl, this.config.coordinator.host, this.config.mdns.interface ?? undefined);
  }

  /**
   * Enrolls an agent's key, so that it may join without the data dir's join credential: what an
   * invite redeemed (`via: 'invite'`) or an operator's approval (`via: 'approval'`) does. From now
   * on the key has its own NATS user (the tags given; on an external NATS, through the auth
   * callout), with which the agent connects and sends its signed heartbeat; judged like any other
   * advertisement (validation, watcher, policy), it then becomes `live` as a proven agent. With
   * `agentId` the id is bound to the key at once; without, at the agent's first admission. An
   * advertisement with the key may not name tags beyond `tags`, nor another id than `agentId`.
   * `expiresAt` bounds when the key may first be used; once its agent was admitted, the enrollment
   * lasts until the operator forgets the agent (DELETE /agents/<id>, `amf agents forget`).
   * Resolves once stored in the shared `amf_enrollments` bucket (it survives a restart); rejects
   * with AmfError INVALID_REQUEST when the key is malformed or the id is bound to another key.
   */
  enrollKey(request: EnrollmentRequest): Promise<Enrollment> {
    return this.enrollments.enroll(request);
  }

  /**
   * The operator approves a `pending` agent (POST /agents/<id>/approve, `amf agents approve`):
   * its key is enrolled (see {@link enrollKey}) and bound to its id, or a keyless agent becomes live
   * tied to the address it was heard from. `expectedNkey`: the key the operator saw (refused when
   * the listing names another one by now). Rejects with AmfError NOT_FOUND / INVALID_REQUEST.
   */
  async approveAgent(
    agentId: string,
    expectedNkey?: string,
  ): Promise<{ agent: RegisteredAgent; enrollment?: Enrollment }> {
    const approved = this.registry.approve(agentId, expectedNkey);
    await this.enrollments.settled();
    this.log('info', 'agent approved by the operator', {
      agent_id: agentId,
      ...(approved.enrollment ? { nkey: approved.enrollment.nkey } : {}),
    });
    return approved;
  }

  /**
   * The operator disables an agent (POST /agents/<id>/disable, `amf agents disable`): it stays
   * admitted and connected and finishes what it holds, but gets no new work and no routes, on every
   * coordinator of the mesh (registry/disablements.ts). `from`: the request's peer address, kept for
   * the audit trail. Recorded as an `amf.policy.warning` (reason `agent_disabled`) naming who did it.
   * Resolves once stored in the shared bucket; rejects with AmfError NOT_FOUND / INVALID_REQUEST.
   */
  async disableAgent(
    agentId: string,
    from?: string,
  ): Promise<{ disablement: Disablement; changed: boolean }> {
    const before = this.registry.disablement(agentId);
    const disablement = this.registry.disable(agentId, 'operator', from);
    await this.disablements.settled();
    if (before) return { disablement, changed: false };
    this.log('info', 'agent disabled by the operator', { agent_id: agentId, ...(from ? { from } : {}) });
    this.notices.warn({
      reason: 'agent_disabled',
      message: `agent ${agentId} disabled by the operator${from ? ` (from ${from})` : ''}: it finishes the tasks it holds and gets no new work until it is enabled`,
      agent_id: agentId,
      details: { by: disablement.by, ...(from ? { from } : {}) },
    });
    return { disablement, changed: true };
  }

  /**
   * The operator enables a disabled agent again (POST /agents/<id>/enable, `amf agents enable`): it
   * is offered work and routes as before. Recorded as `amf.policy.warning` (reason `agent_enabled`).
   * False when it was not disabled; rejects with AmfError NOT_FOUND for an agent nobody knows.
   */
  async enableAgent(agentId: string, from?: string): Promise<boolean> {
    const lifted = this.registry.enable(agentId);
    if (!lifted) {
      if (!this.registry.get(agentId) && this.registry.boundKey(agentId) === undefined)
        throw new AmfError('NOT_FOUND', `no agent ${agentId} is known to this coordinator`);
      return false;
    }
    await this.disablements.settled();
    this.log('info', 'agent enabled by the operator', { agent_id: agentId, ...(from ? { from } : {}) });
    this.notices.warn({
      reason: 'agent_enabled',
      message: `agent ${agentId} enabled by the operator${from ? ` (from ${from})` : ''}: it is offered work again`,
      agent_id: agentId,
      details: { by: 'operator', ...(from ? { from } : {}) },
    });
    return true;
  }

  /** True while the NATS connection is usable (not closed, not between a disconnect and a reconnect). */
  get natsConnected(): boolean {
    return this.connected && !this.nc.isClosed();
  }

  /** What the spawned nats-server logged of its errors and its store (natsServerLog.ts). */
  serverLog: NatsServerLog | undefined;

  /** Stored messages found lost, at start and while running (storeIntegrity.ts). */
  storeIntegrity: StoreIntegrity | undefined;

  /**
   * Whether the fabric answers and its store takes writes (fabricCondition.ts): new tasks are
   * refused with the reason while it does not, and `/health` says so.
   */
  readonly condition: FabricCondition;

  /** The fabric as `/health` and `/metrics` report it. */
  get fabricHealth(): FabricHealth {
    return fabricHealthOf(
      this.natsConnected,
      this.natsServer,
      storeHealthWithLosses(this.serverLog?.storeHealth(), this.storeIntegrity?.losses()),
      this.condition.health(),
    );
  }

  /** Stops everything this coordinator started; in-flight tasks end with a terminal event. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.sweepTimer);
      this.condition.close();
      // Written while the connection is up: the next start compares the streams with it.
      await this.storeIntegrity?.close().catch(() => undefined);
      // Given back first, so another coordinator takes over the sweeps while this one drains.
      await this.sweeper.handOver();
      await this.mdnsDoor?.close().catch(() => undefined);
      this.heartbeatDoor.close();
      this.liveness.close();
      this.grants?.close();
      this.forgetWatch?.stop();
      this.enrollments.close();
      this.disablements.close();
      this.admission.close();
      this.artifacts.close();
      this.taskEvents.close();
      const { results, authenticity, dispatcher, lifecycle } = this;
      await closeTaskPath({ results, authenticity, dispatcher, lifecycle });
      await this.watcherService?.close().catch(() => undefined);
      await this.parts.watcher.close().catch(() => undefined);
      await this.shared.close().catch(() => undefined);
      await this.sweeper.close();
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

/** nats-server's bare "insufficient storage resources" as a sentence that says what to do. */
function explainStoreFailure(err: unknown, dataDir: string, budget: StoreBudget | undefined): unknown {
  const message = err instanceof Error ? err.message : String(err);
  if (!/insufficient storage|storage resources/i.test(message)) return err;
  const free = budget?.free !== undefined ? ` (${formatBytes(budget.free)} free)` : '';
  return new AmfError(
    'UNAVAILABLE',
    `the JetStream store in ${dataDir}${free} cannot hold the mesh's streams: free some space, use a data dir ` +
      `on a larger disk (--data-dir), or set nats.store_max_bytes (at least 16 MiB); nats-server said: ${message}`,
    undefined,
    { cause: err },
  );
}
