/**
 * The nats-server a coordinator without `nats.url` spawns and supervises, under the data dir's
 * instance lock: two nats-servers must never open one JetStream directory, so the lock is taken
 * before the server starts, and given back if it does not start.
 */
import type { AmfConfig } from '../config/config.js';
import { spawnedNatsMaxPayload } from '../config/payloadLimits.js';
import type { NatsCredentials, RoleCredential } from '../fabric/credentials.js';
import { acquireInstanceLock, type InstanceLock } from '../fabric/instanceLock.js';
import {
  superviseNatsServer,
  type NatsSupervisorEvent,
  type PermissionViolation,
  type SupervisedNatsServer,
} from '../fabric/natsServer/supervisor.js';
import type { LogFn } from '../log.js';

export interface SpawnedNats {
  server: SupervisedNatsServer;
  lock: InstanceLock;
  url: string;
}

export async function spawnCoordinatorNats(opts: {
  config: AmfConfig;
  credentials: NatsCredentials;
  join: RoleCredential;
  /** Seed workers connect with the shared specialist user: only legacy mode needs it. */
  specialistUser: boolean;
  onEvent: (event: NatsSupervisorEvent) => void;
  onViolation: (violation: PermissionViolation) => void;
  log: LogFn;
  /** Every line the server prints (natsServerLog.ts turns its errors into log lines and health). */
  serverLines?: (line: string) => void;
}): Promise<SpawnedNats> {
  const { config } = opts;
  const lock = await acquireInstanceLock(config.dataDir);
  let server: SupervisedNatsServer | undefined;
  try {
    server = await superviseNatsServer({
      dataDir: config.dataDir,
      credentials: opts.credentials,
      // `amf up --host ADDR` puts NATS on ADDR too: workers on other machines dial it there.
      host: config.coordinator.host,
      port: config.nats.port,
      binary: config.nats.serverBinary,
      maxPayloadBytes: spawnedNatsMaxPayload(config),
      onEvent: opts.onEvent,
      users: { join: opts.join, agents: [] },
      specialistUser: opts.specialistUser,
      onViolation: opts.onViolation,
      ...(opts.serverLines ? { logger: opts.serverLines } : {}),
    });
    await lock.update({ nats_url: server.url });
  } catch (err) {
    await server?.close();
    await lock.release();
    throw err;
  }
  opts.log('info', 'nats-server started', { url: server.url, pid: server.pid });
  return { server, lock, url: server.url };
}
