/**
 * One real nats-server ≥ 2.10 (the pinned binary of scripts/install-nats.sh) configured for AMF's auth
 * callout exactly as the cluster nodes are (src/fabric/natsServer/config.ts with `authCallout`):
 * the role users static, every other login asked of the coordinators. It plays "an external NATS"
 * for `amf up --nats-url`, with the mesh's credentials and issuer key from `dataDir`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { calloutKeyFile, loadOrCreateCalloutIssuer } from '../../src/identity/calloutIssuer.js';
import { connectAs } from '../../src/fabric/connect.js';
import { loadOrCreateCredentials, loadOrCreateSystemCredential } from '../../src/fabric/credentials.js';
import { renderNatsConfig } from '../../src/fabric/natsServer/config.js';
import { clusterNatsBinary } from './natsCluster.js';
import { freePort } from '../../scripts/lib/freePort.mjs';

export interface CalloutNats {
  url: string;
  /** The server's log file (what `nats.server_logs` names). */
  logFile: string;
  /** The server's output so far (violations, auth errors). */
  log(): string;
  close(): Promise<void>;
}

/** Starts the server and waits until the coordinator user (static, no callout) can log in. */
export async function startCalloutNats(
  dataDir: string,
  /** `systemUser`: a `$SYS` user in `system.json`, with which the coordinator kicks revoked agents. */
  options: { specialistUser?: boolean; systemUser?: boolean } = {},
): Promise<CalloutNats> {
  const binary = await clusterNatsBinary();
  const credentials = await loadOrCreateCredentials(dataDir);
  const issuer = await loadOrCreateCalloutIssuer(calloutKeyFile(dataDir, {}));
  const storeDir = join(dataDir, 'external-nats');
  await mkdir(storeDir, { recursive: true });
  const port = await freePort();
  const conf = join(storeDir, 'nats-server.conf');
  await writeFile(
    conf,
    renderNatsConfig({
      host: '127.0.0.1',
      port,
      storeDir,
      credentials,
      authCallout: { issuer: issuer.publicKey, xkey: issuer.xkeyPublicKey },
      ...(options.specialistUser !== undefined ? { specialistUser: options.specialistUser } : {}),
      ...(options.systemUser ? { systemUser: await loadOrCreateSystemCredential(dataDir, {}) } : {}),
    }),
    { mode: 0o600 },
  );
  const logFile = join(storeDir, 'nats-server.log');
  const child: ChildProcess = spawn(binary, ['-c', conf, '-l', logFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (b: Buffer): void => {
    output = (output + b.toString()).slice(-200_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const url = `nats://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nats-server exited:\n${output}${readLog(logFile)}`);
    try {
      const nc = await connectAs(url, credentials.coordinator, 'callout-probe', { maxReconnectAttempts: 0 });
      await nc.close();
      break;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    logFile,
    log: () => output + readLog(logFile),
    close: async () => {
      process.removeListener('exit', killOnExit);
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise<void>((r) => child.once('close', () => r()));
      child.kill('SIGTERM');
      await gone;
    },
  };
}

function readLog(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
