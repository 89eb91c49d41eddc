/**
 * `amf doctor`'s look at the JetStream store: the free space of the data dir's disk (nats-server
 * cannot write on a full one, and `amf up` sizes its streams from it), and, when a coordinator runs,
 * the store as that coordinator finds it (`/health`'s `nats`: a full or silent JetStream, a store
 * the server reported full or corrupt, messages found lost with the tasks they may have affected, a
 * server that does not answer).
 */
import { statfs } from 'node:fs/promises';
import { LOW_DISK_BYTES } from '../coordinator/fabricCondition.js';
import { formatBytes } from '../fabric/natsServer/storeBudget.js';
import { fail, pass, warn, type DoctorCheck } from './doctorOutcome.js';
import { nearestExisting } from './doctorProbes.js';

/**
 * Less free space than this keeps the streams below their default sizes
 * (fabric/natsServer/storeBudget.ts).
 */
const SMALL_DISK_BYTES = 64 * 1024 * 1024;
const HEALTH_TIMEOUT_MS = 1000;

/** What `/health` says of the fabric (the fields this check reads). */
interface NatsHealth {
  connected?: unknown;
  responsive?: unknown;
  jetstream?: unknown;
  problem?: unknown;
  store?: { state?: unknown; detail?: unknown; losses?: unknown };
}

/** The store's state: the data dir's disk, and the running coordinator's view when one answers. */
export async function checkStore(dataDir: string, healthUrl: string | undefined): Promise<DoctorCheck> {
  const fromCoordinator = healthUrl ? await runningStore(healthUrl) : undefined;
  if (fromCoordinator) return fromCoordinator;
  const where = await nearestExisting(dataDir);
  const free = await statfs(where).then(
    (s) => s.bavail * s.bsize,
    () => undefined,
  );
  if (free === undefined) return warn('store', `cannot read the free space of ${where}`);
  if (free < LOW_DISK_BYTES)
    return fail(
      'store',
      `${formatBytes(free)} free on the disk of ${dataDir}: the JetStream store cannot write`,
      'free some space, or use a data dir on another disk (--data-dir)',
    );
  if (free < SMALL_DISK_BYTES)
    return warn(
      'store',
      `${formatBytes(free)} free on the disk of ${dataDir}: the streams are sized down to fit`,
      'free some space, or set nats.store_max_bytes',
    );
  return pass('store', `${formatBytes(free)} free on the disk of ${dataDir}`);
}

/** The store as the coordinator at `healthUrl` reports it; undefined when none answers. */
async function runningStore(healthUrl: string): Promise<DoctorCheck | undefined> {
  let nats: NatsHealth | undefined;
  try {
    // Read whatever the status: a degraded coordinator answers 503 with the reason in the body.
    const res = await fetch(healthUrl, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
    const body = (await res.json()) as { nats?: NatsHealth };
    nats = body.nats;
  } catch {
    return undefined;
  }
  if (!nats || typeof nats !== 'object') return undefined;
  const problem = typeof nats.problem === 'string' ? nats.problem : undefined;
  const storeState = typeof nats.store?.state === 'string' ? nats.store.state : 'ok';
  const storeDetail = typeof nats.store?.detail === 'string' ? `: ${nats.store.detail}` : '';
  if (nats.jetstream === 'full' || storeState === 'full')
    return fail(
      'store',
      `the running mesh's JetStream store is full${problem ? ` (${problem})` : storeDetail}; new tasks are refused (507)`,
      'free some space on the data dir disk: the mesh resumes by itself',
    );
  const losses = Array.isArray(nats.store?.losses) ? nats.store.losses.length : 0;
  if (storeState === 'corrupt' && losses > 0)
    // The detail names each stream, how many messages and bytes were lost, and the tasks affected.
    return fail(
      'store',
      `the running mesh's JetStream store lost messages${storeDetail}`,
      "keep a copy of the data dir's nats/ folder; the tasks named may have lost their events or results",
    );
  if (storeState === 'corrupt')
    return fail(
      'store',
      `nats-server reported a damaged store block${storeDetail}; messages in it may be lost`,
      "stop the mesh, keep a copy of the data dir's nats/ folder, and start it again",
    );
  if (nats.connected === false || nats.responsive === false)
    return fail(
      'store',
      `the running mesh's NATS server is unreachable or frozen${problem ? ` (${problem})` : ''}`,
    );
  if (nats.jetstream === 'silent')
    return warn('store', `the running mesh's JetStream is not answering${problem ? ` (${problem})` : ''}`);
  return pass('store', "the running mesh's JetStream store takes writes");
}
