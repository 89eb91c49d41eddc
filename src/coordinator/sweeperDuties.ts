/**
 * What one coordinator does for the whole mesh while it holds the sweeper lease, and the sign of
 * life every coordinator gives so the holder knows whose tasks were left behind:
 *
 * - the registry sweep's shared writes (agents gone silent are marked offline in KV by the holder
 *   only; what its sweep found while another held the lease is reconciled when it takes over);
 * - the tasks of coordinators that stopped without a goodbye, brought to an end (orphanSweep.ts).
 */
import { WORK_STREAM, type FabricStores } from '../fabric/jetstream.js';
import type { LogFn } from '../log.js';
import type { AgentRegistry, RegistryChange } from '../registry/agentRegistry.js';
import type { PolicyNotices } from '../registry/policyNotices.js';
import { CoordinatorPresence, joinPasswordDigest } from './coordinatorPresence.js';
import { sweeperLease, type LeaderLease } from './leaderLease.js';
import { OrphanSweep } from './orphanSweep.js';
import type { SharedState } from './sharedState.js';

export interface SweeperDutiesDeps {
  stores: Pick<FabricStores, 'leases' | 'tasks' | 'jsm'>;
  instanceId: string;
  registry: AgentRegistry;
  notices: PolicyNotices;
  shared: Pick<SharedState, 'reconcileOffline'>;
  defaultTtlSeconds: number;
  /** This coordinator's join password (only its digest is shared). */
  joinPassword: string;
  log: LogFn;
}

export class SweeperDuties {
  readonly lease: LeaderLease;
  readonly presence: CoordinatorPresence;
  readonly orphans: OrphanSweep;

  constructor(private readonly deps: SweeperDutiesDeps) {
    const { stores, instanceId, registry, notices, log } = deps;
    this.lease = sweeperLease(stores.leases, instanceId, log);
    this.presence = new CoordinatorPresence({
      kv: stores.leases,
      instanceId,
      onError: (err) => log('debug', 'coordinator presence not written', { err: String(err) }),
      joinDigest: joinPasswordDigest(deps.joinPassword),
      onJoinMismatch: (other) =>
        log(
          'warn',
          'another coordinator of this mesh has another join password: workers whose login it answers are refused; copy join.json (docs/cluster.md)',
          {
            instance: other,
          },
        ),
    });
    this.orphans = new OrphanSweep({
      tasks: stores.tasks,
      presence: this.presence,
      notices,
      agents: registry,
      isHolder: () => this.lease.isHolder,
      log,
      defaultTtlSeconds: deps.defaultTtlSeconds,
      // A failed task's offer leaves the work queue: no worker back later runs a task that is over.
      withdrawWork: (seq) => stores.jsm.streams.deleteMessage(WORK_STREAM, seq, false).then(() => undefined),
    });
  }

  /** Only the holder mirrors an agent's going offline for silence; every other change is mirrored by all. */
  mirrors(change: RegistryChange): boolean {
    return this.lease.isHolder || !(change.kind === 'offline' && change.reason === 'heartbeat_missed');
  }

  start(): void {
    const { log, instanceId, shared, registry } = this.deps;
    this.lease.onAcquired(() => {
      log('info', 'sweeper lease acquired', { instance: instanceId });
      void shared.reconcileOffline(registry);
    });
    this.lease.onLost((reason) => log('info', 'sweeper lease lost', { reason }));
    this.lease.start();
    this.presence.start();
    this.orphans.start();
  }

  /** Gives the lease back, so another coordinator takes over the sweeps while this one drains. */
  async handOver(): Promise<void> {
    await this.orphans.close();
    await this.lease.close().catch(() => undefined);
  }

  /** Last, once this coordinator's tasks have ended: its presence goes with a goodbye. */
  async close(): Promise<void> {
    await this.handOver();
    await this.presence.close();
  }
}
