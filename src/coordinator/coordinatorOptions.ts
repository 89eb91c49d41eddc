/** What a coordinator is started with, and how its fabric looks from outside (`/health`, `/metrics`). */
import type { AdmissionOutcome } from '../admission/admissionPipeline.js';
import type { AmfConfig } from '../config/config.js';
import type { StoreHealth } from './natsServerLog.js';
import type { FabricConditionHealth } from './fabricCondition.js';
import type { SupervisedNatsServer } from '../fabric/natsServer/supervisor.js';
import type { LogFn } from '../log.js';

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
  /**
   * `degraded` while the NATS connection is down, the server does not answer (frozen), the store
   * is full or JetStream silent, or the spawned server is being restarted.
   */
  status: 'ok' | 'degraded';
  connected: boolean;
  /** The spawned nats-server (absent with `--nats-url`). */
  server?: { pid: number; state: 'running' | 'restarting' | 'failed'; restarts: number };
  /** The spawned server's store, as its own log reports it (natsServerLog.ts). */
  store?: StoreHealth;
  /** False while the server does not answer pings (frozen) or the connection is down. */
  responsive?: boolean;
  /** JetStream's store as this coordinator's writes find it (fabricCondition.ts). */
  jetstream?: FabricConditionHealth['jetstream'];
  /** What is wrong with the fabric, in a sentence, when something is. */
  problem?: string;
  /** Free bytes on the data dir's disk (spawned server only). */
  disk_free_bytes?: number;
}

/** The fabric's health from the connection state, the spawned server and its store (if any). */
export function fabricHealthOf(
  connected: boolean,
  natsServer: SupervisedNatsServer | undefined,
  store?: StoreHealth,
  condition?: FabricConditionHealth,
): FabricHealth {
  const server = natsServer
    ? { pid: natsServer.pid, state: natsServer.state, restarts: natsServer.restarts }
    : undefined;
  const storeOk = store === undefined || store.state === 'ok';
  const conditionOk = condition === undefined || (condition.responsive && condition.jetstream === 'ok');
  const status =
    connected && storeOk && conditionOk && (server === undefined || server.state === 'running')
      ? 'ok'
      : 'degraded';
  return {
    status,
    connected,
    ...(server ? { server } : {}),
    ...(store ? { store } : {}),
    ...(condition ?? {}),
  };
}
