/**
 * `amf doctor`: checks the machine and the configuration before `amf up`, and says how to fix
 * each problem. Checks are independent and run concurrently; every one that touches something
 * outside the process (a program, a socket, an HTTP server) has a timeout, so doctor always ends.
 */
import type { AmfConfig } from '../config/config.js';
import { readInstanceLock } from '../fabric/instanceLock.js';
import {
  checkCoordinatorPort,
  checkCoordinatorUrl,
  checkCredentials,
  checkDataDir,
  checkNatsBinary,
  checkNatsPort,
  checkNatsUrl,
  checkEd25519,
  checkMemoryTrimming,
  checkNode,
  checkOpa,
  checkOpaServer,
  coordinatorHealthUrl,
} from './doctorChecks.js';
import { fail, type DoctorCheck, type DoctorLevel, type DoctorResult } from './doctorOutcome.js';
import { checkStore } from './doctorStore.js';

/** `/health` of a coordinator URL, or undefined when it is not one. */
function healthOf(url: string): string | undefined {
  try {
    return new URL('/health', url).toString();
  } catch {
    return undefined;
  }
}

export type { DoctorCheck, DoctorLevel, DoctorResult } from './doctorOutcome.js';

/** What to check: the loaded configuration, and optionally a coordinator URL to probe (`--coordinator`). */
export interface DoctorOptions {
  config: AmfConfig;
  coordinatorUrl?: string;
}

/** Runs every check; never throws for a failed check (an unexpected error becomes a `fail`). */
export async function runDoctor(opts: DoctorOptions): Promise<DoctorResult> {
  const { config } = opts;
  // A mesh already running on this data dir owns its nats-server port: that is not a problem.
  const running = await readInstanceLock(config.dataDir).catch(() => undefined);
  const checks: Array<Promise<DoctorCheck | DoctorCheck[]>> = [
    Promise.resolve(checkNode()),
    Promise.resolve(checkEd25519()),
    Promise.resolve(checkMemoryTrimming()),
    config.nats.url ? checkNatsUrl(config.nats.url) : checkNatsBinary(config.nats.serverBinary),
    config.nats.url
      ? Promise.resolve([])
      : checkNatsPort(config.nats.port, running, coordinatorHealthUrl(config.coordinator)),
    checkOpa(),
    config.policy.opaUrl ? checkOpaServer(config.policy.opaUrl) : Promise.resolve([]),
    checkCoordinatorPort(config.coordinator.host, config.coordinator.port),
    opts.coordinatorUrl ? checkCoordinatorUrl(opts.coordinatorUrl) : Promise.resolve([]),
    checkDataDir(config.dataDir),
    checkCredentials(config.dataDir),
    // The running mesh's store when its coordinator answers (the lock names it), else the disk.
    checkStore(
      config.dataDir,
      running?.url
        ? new URL('/health', running.url).toString()
        : opts.coordinatorUrl && healthOf(opts.coordinatorUrl),
    ),
  ];
  const names = [
    'node',
    'nats',
    'nats-port',
    'opa',
    'opa-server',
    'coordinator-port',
    'coordinator',
    'data-dir',
    'credentials',
    'store',
  ];
  const settled = await Promise.allSettled(checks);
  const results = settled.flatMap((s, i): DoctorCheck[] =>
    s.status === 'fulfilled'
      ? ([] as DoctorCheck[]).concat(s.value)
      : [fail(names[i] ?? 'check', `check crashed: ${(s.reason as Error)?.message ?? String(s.reason)}`)],
  );
  return { ok: results.every((c) => c.level !== 'fail'), checks: results };
}

/** One line per check: a ✓ / ! / ✗ mark, the name, the detail, and the fix when there is one. */
export function formatDoctorReport(result: DoctorResult): string {
  const mark: Record<DoctorLevel, string> = { ok: '✓', warn: '!', fail: '✗' };
  return result.checks
    .map((c) => `${mark[c.level]} ${c.name}: ${c.detail}${c.fix ? ` (fix: ${c.fix})` : ''}`)
    .join('\n');
}
