/**
 * The durable side of the fabric: JetStream streams that keep a bounded history of public and
 * internal events, and the KV buckets that hold the agent registry and task state, so that every
 * coordinator on the same NATS sees the same mesh.
 */
import {
  jetstreamManager,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  StoreCompression,
  DiscardPolicy,
} from '@nats-io/jetstream';
import { Kvm, type KV, type KvOptions } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { COMPRESSED_STORES_SINCE, compareVersions, parseServerVersion } from './natsServer/version.js';

const NANOS_PER_SECOND = 1_000_000_000;

export const EVENTS_STREAM = 'AMF_EVENTS';
export const INTERNAL_STREAM = 'AMF_INTERNAL';
/** Audit trail of federated MCP calls (`amf.audit.>`), queried by `GET /audit` and `amf audit`. */
export const AUDIT_STREAM = 'AMF_AUDIT';
export const AUDIT_STREAM_SUBJECTS = ['amf.audit.>'];
/**
 * Workers' final results of mesh tasks (`amf.internal.result.<nkey>.<task_id>`, a seed-mode worker's
 * `amf.internal.result.<task_id>`), kept until a coordinator has decided on them (one shared durable
 * consumer, which deletes those that decided nothing), so a result survives a NATS blip or a coordinator restart
 * between the worker's publish and the coordinator's decision. Full, the stream refuses new results
 * (discard new) rather than evicting stored ones: a flood cannot push another agent's result out,
 * and a refused worker keeps its result and retries.
 */
export const RESULTS_STREAM = 'AMF_RESULTS';
export const RESULTS_STREAM_SUBJECTS = ['amf.internal.result.>'];
/**
 * Announcements as a work queue (`amf.work.<tag>`): one durable consumer per tag that every AMF
 * worker of the tag pulls from when it has a free slot; a message leaves the stream when acked.
 */
export const WORK_STREAM = 'AMF_WORK';
export const WORK_STREAM_SUBJECTS = ['amf.work.>'];
/** The coordinators' shared durable consumer of AMF_RESULTS. */
export const RESULTS_CONSUMER = 'coordinators';
export const AGENTS_BUCKET = 'amf_agents';
export const TASKS_BUCKET = 'amf_tasks';
/**
 * TOFU pins of agents' TLS certificates for `https://` MCP endpoints
 * (protocols/mcp/federation/tlsPins.ts).
 */
export const MCP_PINS_BUCKET = 'amf_mcp_pins';
/** Leases that make one coordinator of several do a job alone (coordinator/leaderLease.ts). */
export const LEASES_BUCKET = 'amf_leases';
/** Redeemed invites (`amf invite`): one key per invite id, so an invite is used once mesh-wide. */
export const INVITES_BUCKET = 'amf_invites';
/** The longest an invite may live; its redemption record is kept as long. */
export const MAX_INVITE_TTL_SECONDS = 7 * 24 * 3600;
/**
 * Enrolled agent keys (registry/enrollments.ts): keys an approval or an invite let in without the
 * data dir's join credential, one entry per nkey, so they keep their NATS user across restarts.
 */
export const ENROLLMENTS_BUCKET = 'amf_enrollments';
/** Agents the operator disabled (registry/disablements.ts): one small key per agent id. */
export const DISABLED_AGENTS_BUCKET = 'amf_disabled_agents';
export const A2A_WAITING_BUCKET = 'amf_a2a_waiting';

/**
 * Public fabric subjects that are persisted. Replies are not (they duplicate these), and neither are
 * heartbeats: they are the highest-volume events, say nothing new once an agent is admitted (the
 * admission itself is `amf.discovery.capability.advertise`), and a heartbeat flood must not turn into
 * a disk-write flood. Follow-ups (`amf.task.input`) are kept from the holder's own subject, where
 * coordinators send them. Artifacts and evidence have a stream of their own (AMF_ARTIFACTS).
 */
export const PUBLIC_STREAM_SUBJECTS = [
  'amf.discovery.capability.>',
  'amf.task.>',
  'amf.result.>',
  'amf.policy.>',
  'amf.agent.*.input',
];
/**
 * Artifacts and evidence, kept apart from the event history (docs/reliability.md, "Streams and what
 * fills them"): they are the bulk of what agents may send, so however many of them arrive, they push
 * out only older artifacts and evidence, never a result or a warning of AMF_EVENTS. Agents' own ones
 * arrive here through the coordinators, within each agent's quota (coordinator/artifactIntake.ts).
 */
export const ARTIFACTS_STREAM = 'AMF_ARTIFACTS';
export const ARTIFACTS_STREAM_SUBJECTS = ['amf.artifact.>', 'amf.evidence.>'];
export const INTERNAL_STREAM_SUBJECTS = ['amf.internal.raw', 'amf.internal.classified'];

/** The least a stream or bucket is given however small the disk (natsServer/storeBudget.ts). */
export const MIN_STORE_BYTES = 1024 * 1024;

/**
 * What each stream and bucket reserves with these limits and no scaling: JetStream counts a
 * stream's `max_bytes` against the server's store when the stream is made, used or not.
 */
function reservations(retention: RetentionLimits, artifacts: RetentionLimits): number[] {
  const MiB = 1024 * 1024;
  const capped = (limit: number) => Math.min(retention.maxBytes, limit);
  return [
    ...[retention.maxBytes, retention.maxBytes, artifacts.maxBytes], // events, internal, artifacts
    ...[capped(256 * MiB), capped(256 * MiB), capped(512 * MiB)], // audit, results, work
    ...[64 * MiB, 256 * MiB, 16 * MiB, 16 * MiB], // agents, tasks, MCP pins, enrollments
    ...[MiB, MiB, MiB], // leases, invites, disabled agents (fixed)
    64 * MiB, // A2A tasks waiting for input
  ];
}

/** What the streams and buckets reserve in all with these limits and no scaling. */
export function fullReservation(
  retention: RetentionLimits = DEFAULT_EVENT_RETENTION,
  artifacts: RetentionLimits = DEFAULT_ARTIFACT_RETENTION,
): number {
  return reservations(retention, artifacts).reduce((sum, bytes) => sum + bytes, 0);
}

/**
 * The least the streams and buckets reserve however small the disk: each gets at least
 * {@link MIN_STORE_BYTES}, so a budget must first cover these floors (natsServer/storeBudget.ts).
 */
export function minimumReservation(): number {
  return reservations(DEFAULT_EVENT_RETENTION, DEFAULT_ARTIFACT_RETENTION).length * MIN_STORE_BYTES;
}

export interface RetentionLimits {
  maxAgeSeconds: number;
  maxMessages: number;
  maxBytes: number;
  /** Largest message the stream stores (default: the server's max_payload). */
  maxMessageBytes?: number;
}

export const DEFAULT_EVENT_RETENTION: RetentionLimits = {
  maxAgeSeconds: 24 * 3600,
  maxMessages: 1_000_000,
  maxBytes: 512 * 1024 * 1024,
};

/** Config `artifacts.*`' defaults: a day of artifacts and evidence, up to 256 KiB each. */
export const DEFAULT_ARTIFACT_RETENTION: RetentionLimits = {
  maxAgeSeconds: 24 * 3600,
  maxMessages: 100_000,
  maxBytes: 256 * 1024 * 1024,
  maxMessageBytes: 256 * 1024,
};

export interface FabricStores {
  jsm: JetStreamManager;
  agents: KV;
  tasks: KV;
  mcpPins: KV;
  leases: KV;
  invites: KV;
  enrollments: KV;
  disabledAgents: KV;
  /** A2A tasks waiting for their client's next message (protocols/a2a/waitingTasks.ts). */
  a2aWaiting: KV;
}

async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  subjects: string[],
  limits: RetentionLimits,
  /** Required, not defaulted: a stream left at 1 copy on a cluster is lost with its node. */
  replicas: number,
  retention: RetentionPolicy = RetentionPolicy.Limits,
  discard: DiscardPolicy = DiscardPolicy.Old,
  /** Absent: not named at all (a nats-server older than 2.10 refuses a config that names it). */
  compression?: StoreCompression,
) {
  const config = {
    name,
    subjects,
    retention,
    storage: StorageType.File,
    discard,
    ...(compression !== undefined ? { compression } : {}),
    max_age: limits.maxAgeSeconds * NANOS_PER_SECOND,
    max_msgs: limits.maxMessages,
    max_bytes: limits.maxBytes,
    max_msg_size: limits.maxMessageBytes ?? -1,
    num_replicas: replicas,
  };
  try {
    await jsm.streams.info(name);
    // An update also rescales an existing stream (JetStream moves replicas up or down in place).
    await jsm.streams.update(name, config);
  } catch {
    await jsm.streams.add(config);
  }
}

/**
 * Opens a KV bucket with `replicas` copies, creating it if needed. `Kvm.create` leaves an existing
 * bucket's stream as it is, so a bucket made by a single-node run keeps 1 copy on a cluster unless
 * its backing stream is rescaled here.
 */
export async function ensureKvBucket(
  jsm: JetStreamManager,
  kvm: Kvm,
  name: string,
  opts: Partial<KvOptions>,
  replicas: number,
  /** As for a stream: absent leaves it unnamed (servers older than 2.10). */
  compression?: StoreCompression,
): Promise<KV> {
  const kv = await kvm.create(name, {
    ...opts,
    replicas,
    ...(compression === StoreCompression.S2 ? { compression: true } : {}),
  });
  const stream = `KV_${name}`;
  const info = await jsm.streams.info(stream);
  if (
    info.config.num_replicas !== replicas ||
    (compression !== undefined && (info.config.compression ?? StoreCompression.None) !== compression)
  ) {
    await jsm.streams.update(stream, {
      ...info.config,
      num_replicas: replicas,
      ...(compression !== undefined ? { compression } : {}),
    });
  }
  return kv;
}

/**
 * Creates (or updates) the streams and opens the KV buckets. Idempotent, so every coordinator calls it
 * at start. `replicas` (config `nats.replicas`) applies to every stream and bucket alike: the mesh is
 * only as durable as its least replicated store.
 */
export async function ensureFabricStores(
  nc: NatsConnection,
  retention: RetentionLimits = DEFAULT_EVENT_RETENTION,
  taskStateTtlSeconds = 3600,
  replicas = 1,
  artifacts: RetentionLimits = DEFAULT_ARTIFACT_RETENTION,
  /** Every stream's and bucket's byte limit times this (natsServer/storeBudget.ts: less on a small disk). */
  storeScale = 1,
): Promise<FabricStores> {
  const jsm = await jetstreamManager(nc);
  // The history streams and the task bucket are stored compressed where the server can (2.10+):
  // JSON events repeat most of their bytes, and a compressed block is a fraction of the disk. Not
  // on a cluster: with replicated compressed streams, the fault drill's node kill and restart
  // (docs/reliability.md, fault 9) ended with acknowledged terminal events missing.
  const history = !compressesStores(nc)
    ? undefined
    : replicas === 1
      ? StoreCompression.S2
      : StoreCompression.None;
  const scaled = (bytes: number): number =>
    storeScale >= 1 ? bytes : Math.max(MIN_STORE_BYTES, Math.floor(bytes * storeScale));
  retention = { ...retention, maxBytes: scaled(retention.maxBytes) };
  artifacts = { ...artifacts, maxBytes: scaled(artifacts.maxBytes) };
  // In this order: an AMF_EVENTS made before AMF_ARTIFACTS existed still takes artifact subjects, and
  // two streams may not share a subject, so its update gives them up before the artifacts stream is made.
  const limitsHistory = [RetentionPolicy.Limits, DiscardPolicy.Old, history] as const;
  await ensureStream(jsm, EVENTS_STREAM, PUBLIC_STREAM_SUBJECTS, retention, replicas, ...limitsHistory);
  await ensureStream(jsm, ARTIFACTS_STREAM, ARTIFACTS_STREAM_SUBJECTS, artifacts, replicas, ...limitsHistory);
  await ensureStream(
    jsm,
    INTERNAL_STREAM,
    INTERNAL_STREAM_SUBJECTS,
    { ...retention, maxMessages: Math.min(retention.maxMessages, 100_000) },
    replicas,
    ...limitsHistory,
  );
  // Audit records are kept longer than events (a week), bounded by count and bytes.
  await ensureStream(
    jsm,
    AUDIT_STREAM,
    AUDIT_STREAM_SUBJECTS,
    {
      maxAgeSeconds: Math.max(retention.maxAgeSeconds, 7 * 24 * 3600),
      maxMessages: Math.min(retention.maxMessages, 1_000_000),
      maxBytes: Math.min(retention.maxBytes, scaled(256 * 1024 * 1024)),
    },
    replicas,
    ...limitsHistory,
  );
  await ensureStream(
    jsm,
    RESULTS_STREAM,
    RESULTS_STREAM_SUBJECTS,
    {
      maxAgeSeconds: taskStateTtlSeconds,
      maxMessages: Math.min(retention.maxMessages, 1_000_000),
      maxBytes: Math.min(retention.maxBytes, scaled(256 * 1024 * 1024)),
    },
    replicas,
    RetentionPolicy.Limits,
    DiscardPolicy.New,
  );
  await ensureStream(
    jsm,
    WORK_STREAM,
    WORK_STREAM_SUBJECTS,
    {
      maxAgeSeconds: taskStateTtlSeconds,
      maxMessages: Math.min(retention.maxMessages, 1_000_000),
      maxBytes: Math.min(retention.maxBytes, scaled(512 * 1024 * 1024)),
    },
    replicas,
    RetentionPolicy.Workqueue,
  );
  const kvm = new Kvm(nc);
  const bucket = (name: string, opts: Partial<KvOptions>): Promise<KV> =>
    ensureKvBucket(jsm, kvm, name, opts, replicas);
  const agents = await bucket(AGENTS_BUCKET, { history: 1, max_bytes: scaled(64 * 1024 * 1024) });
  const tasks = await ensureKvBucket(
    jsm,
    kvm,
    TASKS_BUCKET,
    { history: 1, ttl: taskStateTtlSeconds * 1000, max_bytes: scaled(256 * 1024 * 1024) },
    replicas,
    history,
  );
  const mcpPins = await bucket(MCP_PINS_BUCKET, { history: 1, max_bytes: scaled(16 * 1024 * 1024) });
  // One small key per lease; no TTL on the bucket: a lease expires by its holder's silence.
  // allow_direct off: direct gets may be answered by a lagging replica, and a lease must read what
  // its compare-and-set writes will be checked against (the stream leader's view).
  const leases = await bucket(LEASES_BUCKET, { history: 1, max_bytes: 1024 * 1024, allow_direct: false });
  // Compare-and-create decides which joiner an invite belongs to: read from the leader, like leases.
  const invites = await bucket(INVITES_BUCKET, {
    history: 1,
    ttl: MAX_INVITE_TTL_SECONDS * 1000,
    max_bytes: 1024 * 1024,
    allow_direct: false,
  });
  const enrollments = await bucket(ENROLLMENTS_BUCKET, { history: 1, max_bytes: scaled(16 * 1024 * 1024) });
  // A few hundred bytes per disabled agent: 1 MiB holds thousands.
  const disabledAgents = await bucket(DISABLED_AGENTS_BUCKET, { history: 1, max_bytes: 1024 * 1024 });
  // A2A tasks waiting for their client's next message (protocols/a2a/waitingTasks.ts): one entry per
  // waiting task with its history, bounded like the A2A bodies that made it.
  const a2aWaiting = await bucket(A2A_WAITING_BUCKET, { history: 1, max_bytes: scaled(64 * 1024 * 1024) });
  return { jsm, agents, tasks, mcpPins, leases, invites, enrollments, disabledAgents, a2aWaiting };
}

/**
 * True when the server stores streams compressed (nats-server 2.10 and later). The results and work
 * streams stay uncompressed: their messages leave within seconds, so compressing them is CPU for
 * nothing.
 */
export function compressesStores(nc: Pick<NatsConnection, 'info'>): boolean {
  const version = parseServerVersion(nc.info?.version);
  return version !== undefined && compareVersions(version, COMPRESSED_STORES_SINCE) >= 0;
}

/** KV keys allow `[-/_=.a-zA-Z0-9]`; agent ids are URIs, so they are stored base64url-encoded. */
export function kvKey(id: string): string {
  return Buffer.from(id, 'utf8').toString('base64url');
}
