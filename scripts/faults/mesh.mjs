/**
 * The mesh under test, built from the real `amf` CLI of this built tree (bin/amf.js → dist/): the
 * coordinator (`amf up`), workers running the drill's sleep handler, and, for the external-NATS
 * faults, a nats-server the drill starts itself with the mesh's credentials through the same
 * startNatsServer the coordinator uses, so its users and ACLs are exactly the mesh's.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startProcess } from './procs.mjs';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const AMF_BIN = join(REPO, 'bin/amf.js');
export const HANDLER = join(REPO, 'scripts/faults/handler.mjs');
export const TAG = 'drill';

/** Imports a module of the built tree; a missing build gets a clear error, not a stack trace. */
export async function fromDist(path) {
  const file = join(REPO, 'dist', path);
  if (!existsSync(file)) throw new Error(`${file} is missing: run \`npm run build\` first`);
  return import(pathToFileURL(file).href);
}

/** Restarted processes take the port they had: chosen outside the kernel's ephemeral range. */
export { freePort } from '../lib/freePort.mjs';

/**
 * Starts `amf up` and resolves once it printed its URLs. `port`/`natsPort` default to 0 (any free
 * port); fixed ones are used where the fault restarts the coordinator as a user would. `env` adds to
 * its environment (e.g. AMF_NATS_SERVER_BIN for the nats-server it spawns).
 */
export async function startCoordinator(
  run,
  { dataDir, label = 'coordinator', port = 0, natsPort = 0, natsUrl, demo = false, env = {} },
) {
  const args = [AMF_BIN, 'up', '--data-dir', dataDir, '--port', String(port)];
  if (natsUrl) args.push('--nats-url', natsUrl);
  else args.push('--nats-port', String(natsPort));
  if (demo) args.push('--demo');
  if (!run.mdns) args.push('--no-mdns');
  const proc = startProcess(process.execPath, args, {
    label,
    env,
    logFile: join(run.logDir, `${label}.log`),
  });
  run.track(proc);
  try {
    const [, url] = await proc.waitFor(/AMF coordinator (http:\/\/\S+)/, 30_000);
    const [, nats] = await proc.waitFor(/^\s*NATS\s+(nats:\/\/\S+)/, 5_000);
    return { proc, url, natsUrl: nats, dataDir };
  } catch (err) {
    await proc.kill();
    throw new Error(`${err.message}\n${proc.tail()}`, { cause: err });
  }
}

/**
 * Starts `amf worker` with the drill handler (sleeping `sleepMs`) and waits until it serves. With
 * `runLog`, the handler appends the id of every task it ran to the end to that file (handler.mjs).
 */
export async function startWorker(
  run,
  { name, coordinatorUrl, dataDir, sleepMs, specialistPass, handler = HANDLER, runLog, env = {} },
) {
  const args = [
    AMF_BIN,
    'worker',
    '--name',
    name,
    '--tags',
    TAG,
    '--port',
    '0',
    '--coordinator',
    coordinatorUrl,
  ];
  args.push('--data-dir', dataDir, '--handler', handler);
  if (!run.mdns) args.push('--no-mdns');
  const proc = startProcess(process.execPath, args, {
    label: name,
    env: {
      AMF_DRILL_SLEEP_MS: String(sleepMs),
      ...(runLog ? { AMF_DRILL_RUN_LOG: runLog } : {}),
      ...(specialistPass ? { AMF_SPECIALIST_PASS: specialistPass } : {}),
      AMF_DRILL_WORKER: name,
      ...env,
    },
    logFile: join(run.logDir, `${name}.log`),
  });
  run.track(proc);
  try {
    // Joining waits for admission (watcher, policy, a NATS user for its key): slow on a loaded machine.
    await proc.waitFor(/AMF worker \S+ serving/, 90_000);
    return proc;
  } catch (err) {
    await proc.kill();
    throw new Error(`${err.message}\n${proc.tail()}`, { cause: err });
  }
}

/** Waits until the coordinator lists `amf/<tag>` (a worker serving it is admitted and live). */
export async function waitForModel(url, tag, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(3000) });
      const body = await res.json();
      if (body.data?.some((m) => m.id === `amf/${tag}`)) return;
      last = JSON.stringify(body).slice(0, 200);
    } catch (err) {
      last = err.message;
    }
    await delay(250);
  }
  throw new Error(`model amf/${tag} not listed at ${url} after ${timeoutMs} ms (last: ${last})`);
}

/** The mesh credentials of `dataDir`, created now if absent (as `amf up` would on first start). */
export async function meshCredentials(dataDir) {
  const { loadOrCreateCredentials } = await fromDist('fabric/credentials.js');
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  return loadOrCreateCredentials(dataDir, {});
}

/**
 * A nats-server the drill owns (external NATS for the mesh): config, users and ACLs rendered by the
 * mesh's own code, JetStream under `<dir>/nats`. `port` 0 picks one; restarts pass the old port.
 */
export async function startExternalNats(run, { dir, credentials, port = 0 }) {
  const { startNatsServer } = await fromDist('fabric/natsServer/supervisor.js');
  const handle = await startNatsServer({
    dataDir: dir,
    credentials,
    port,
    readyTimeoutMs: 20_000,
    logger: (line) => run.appendLog('external-nats', line),
  });
  run.trackPid(handle.pid);
  return handle;
}
