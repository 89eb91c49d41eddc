/** What a coordinator is started with, and how its fabric looks from outside (`/health`, `/metrics`). */
import type { AdmissionOutcome } from '../admission/admissionPipeline.js';
import type { AmfConfig } from '../config/config.js';
import type { StoreHealth } from './natsServerLog.js';
import type { SupervisedNatsServer } from '../fabric/natsServer.js';
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
  /** `degraded` while the NATS connection is down or the spawned server is being restarted. */
  status: 'ok' | 'degraded';
  connected: boolean;
  /** The spawned nats-server (absent with `--nats-url`). */
  server?: { pid: number; state: 'running' | 'restarting' | 'failed'; restarts: number };
  /** The spawned server's store, as its own log reports it (natsServerLog.ts). */
  store?: StoreHealth;
}

/** The fabric's health from the connection state, the spawned server and its store (if any). */
export function fabricHealthOf(
  connected: boolean,
  natsServer: SupervisedNatsServer | undefined,
  store?: StoreHealth,
): FabricHealth {
  const server = natsServer
    ? { pid: natsServer.pid, state: natsServer.state, restarts: natsServer.restarts }
    : undefined;
  const storeOk = store === undefined || store.state === 'ok';
  const status =
    connected && storeOk && (server === undefined || server.state === 'running') ? 'ok' : 'degraded';
  return { status, connected, ...(server ? { server } : {}), ...(store ? { store } : {}) };
}
