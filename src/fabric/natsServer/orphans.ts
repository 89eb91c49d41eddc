/**
 * The pid file of the running nats-server (`<data-dir>/nats-server.pid`): a server orphaned by a
 * SIGKILLed coordinator is ended by the next start instead of holding the port and the JetStream
 * directory.
 */
import { readFile, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { POLL_MS, STOP_GRACE_MS } from './process.js';
import { pidAlive } from '../../util/pidAlive.js';

/** Where the pid of the running server is recorded, relative to the data dir. */
export const NATS_PID_FILE = 'nats-server.pid';

/** Removes the pid file only while it still names `pid` (a restarted server may have rewritten it). */
export async function removePidFile(file: string, pid: number): Promise<void> {
  const recorded = await readFile(file, 'utf8').catch(() => '');
  if (Number(recorded.trim()) === pid) await unlink(file).catch(() => undefined);
}

/** True when `pid` is a live nats-server started with `configPath` (Linux /proc; false elsewhere). */
async function isOurServer(pid: number, configPath: string): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return false;
  const argv = cmdline.split('\0');
  return basename(argv[0] ?? '').includes('nats-server') && argv.includes(configPath);
}

/**
 * Ends the nats-server recorded in `<dataDir>/nats-server.pid` when it is still running with our
 * config (a pid reused by an unrelated process is left alone): SIGTERM, then SIGKILL after a grace.
 */
export async function endRecordedServer(
  dataDir: string,
  configPath: string,
  logger?: (line: string) => void,
): Promise<void> {
  const file = join(dataDir, NATS_PID_FILE);
  const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return;
  if (!(await isOurServer(pid, configPath))) {
    await unlink(file).catch(() => undefined);
    return;
  }
  logger?.(`ending orphaned nats-server pid ${pid} left by an earlier coordinator`);
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (pidAlive(pid) && (await isOurServer(pid, configPath)) && Date.now() < deadline) await delay(POLL_MS);
  if (pidAlive(pid) && (await isOurServer(pid, configPath))) {
    process.kill(pid, 'SIGKILL');
    const killDeadline = Date.now() + STOP_GRACE_MS;
    while ((await isOurServer(pid, configPath)) && Date.now() < killDeadline) await delay(POLL_MS);
  }
  await unlink(file).catch(() => undefined);
}
