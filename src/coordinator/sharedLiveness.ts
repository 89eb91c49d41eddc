/**
 * What a coordinator that was cut off from the mesh asks the shared registry before it acts on its
 * own view of who is live.
 *
 * Cut off (its NATS connection lost, or its node cut from the rest of the cluster), a coordinator
 * hears no heartbeats and marks every agent offline for silence, while the other coordinators still
 * hear them. Back on the mesh, its view stays wrong until each agent's next heartbeat: it would
 * refuse a claim whose handler may already be running (and offer the task again: a second run),
 * answer "no agent for tag", and re-announce the tasks of workers that are still running them. So
 * before each of those it reads the agent's entry in the shared registry (the `amf_agents` bucket)
 * from the bucket's stream leader: a fresh value, and a failed read while it is still cut off.
 *
 * Only agents this coordinator marked offline for silence are asked about (a goodbye, a denial or
 * the operator's word stands), each at most once a second: nothing here is on the path of a task
 * that goes well. After a reconnect, or when an agent it had marked offline is heard again, it also
 * reads every such agent at once and has the lifecycle take the results its workers stored
 * meanwhile (`onReturn`).
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import { AGENTS_BUCKET, kvKey } from '../fabric/jetstream.js';
import type { LogFn } from '../log.js';
import type { AgentRegistry, RegisteredAgent } from '../registry/agentRegistry.js';
import { AmfError } from '../errors.js';

/**
 * What the shared registry says of an agent marked offline for silence here: `lost` (gone for the
 * mesh too: recover its tasks), `live` (another coordinator still hears it), `unreachable` (this
 * coordinator cannot read the shared state: it is the one cut off).
 */
export type SilenceVerdict = 'lost' | 'live' | 'unreachable';

/** How long one read of the shared registry may take before it counts as unreachable. */
const READ_TIMEOUT_MS = 2_000;
/** A read's answer is reused for this long (claims, results and 404s of one moment share it). */
const READ_REUSE_MS = 1_000;
/** At most this many silent agents of a tag are read for one unknown-model refusal. */
const MAX_READS_PER_TAG = 8;
/**
 * Only agents given up this recently are read for an unknown-model refusal: a partition is short,
 * and an agent silent for longer is gone for the shared registry too (its sweeper wrote it).
 */
const RECENT_SILENCE_MS = 10 * 60_000;
/** At most this many silent agents are read after a reconnect (the most recently silent first). */
const MAX_READS_PER_REFRESH = 256;
/** Remembered silent agents (the registry's own bound on agents is larger; the oldest go first). */
const MAX_SILENT = 10_000;

export interface SharedLivenessOptions {
  registry: Pick<AgentRegistry, 'onChange' | 'get' | 'isLive' | 'servesTag' | 'reviveFromShared'>;
  /** The agent's entry in the shared registry, read fresh; null when there is none; rejects when unreadable. */
  readShared: (agentId: string) => Promise<RegisteredAgent | null>;
  /** True while this coordinator holds the sweeper lease (its sweep decides for the mesh). */
  isHolder: () => boolean;
  /** True while this coordinator's NATS connection is up. */
  connected: () => boolean;
  /**
   * Results meant for this coordinator may have been stored (or taken by another coordinator)
   * while it was away: the tasks held by `agents` ('all' after a reconnect) should look for them.
   */
  onReturn?: (agents: ReadonlySet<string> | 'all') => void;
  log: LogFn;
  now?: () => number;
}

export class SharedLiveness {
  /** Agents marked offline here for silence, with when and their tags. */
  private readonly silent = new Map<string, { at: number; tags: readonly string[] }>();
  /** The same agents by tag: an unknown-model refusal looks at its tag's only. */
  private readonly silentByTag = new Map<string, Set<string>>();
  private readonly reads = new Map<string, { at: number; entry: Promise<RegisteredAgent | null> }>();
  private readonly now: () => number;
  private refreshing: Promise<void> | undefined;
  private refreshAgain: ReadonlySet<string> | 'all' | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly options: SharedLivenessOptions) {
    this.now = options.now ?? Date.now;
  }

  start(): void {
    this.unsubscribe = this.options.registry.onChange((change) => {
      const id = change.agent.record.agent_id;
      if (change.kind === 'offline') {
        if (change.reason !== 'heartbeat_missed') this.forgetSilent(id);
        else this.markSilent(id, change.agent.record.capability_tags ?? []);
        return;
      }
      const wasSilent = this.forgetSilent(id);
      // Heard again after this coordinator had given it up: it (or this coordinator) was cut off,
      // and so perhaps were the others marked silent at the same time.
      if (wasSilent && change.kind === 'online' && !change.fromShared) this.refresh(new Set([id]));
    });
  }

  close(): void {
    this.unsubscribe?.();
    this.silent.clear();
    this.silentByTag.clear();
    this.reads.clear();
  }

  /**
   * A claim (or a result standing in for one) from an agent that is not live here: undefined when
   * there is nothing to ask (not marked offline for silence), else whether the shared registry
   * holds it live, in which case it is live here again. The claim itself is its sign of life.
   */
  confirmLive(agentId: string): Promise<boolean> | undefined {
    if (this.options.registry.isLive(agentId)) return Promise.resolve(true);
    if (!this.silent.has(agentId)) return undefined;
    return this.reviveIfShared(agentId, Number.POSITIVE_INFINITY);
  }

  /**
   * Nobody here serves `tag`: the agents of the tag marked offline for silence are looked up in the
   * shared registry, and those it holds live serve again (until their next heartbeat is due).
   * Resolves whether the tag is served now.
   */
  async confirmTag(tag: string): Promise<boolean> {
    const { registry } = this.options;
    if (registry.servesTag(tag)) return true;
    // Still cut off: nothing to read, and the refusal is true (no agent can be reached from here).
    if (!this.options.connected()) return false;
    // Most recently silent first (a set keeps insertion order, and a new silence re-inserts).
    const candidates: string[] = [];
    for (const id of [...(this.silentByTag.get(tag) ?? [])].reverse()) {
      const at = this.silent.get(id)?.at ?? 0;
      if (this.now() - at > RECENT_SILENCE_MS || candidates.length >= MAX_READS_PER_TAG) break;
      if (registry.get(id)?.status === 'offline') candidates.push(id);
    }
    if (candidates.length === 0) return false;
    await Promise.all(candidates.map((id) => this.reviveIfShared(id, this.heartbeatMs(id))));
    return registry.servesTag(tag);
  }

  /**
   * Before the tasks of an agent marked offline for silence are re-announced or failed: whether the
   * mesh lost it too. The sweeper lease's holder decides for the mesh (its sweep writes the shared
   * registry); any other coordinator asks that registry, and cannot while it is itself cut off.
   */
  async confirmSilence(agentId: string): Promise<SilenceVerdict> {
    if (!this.options.connected()) return 'unreachable';
    if (this.options.registry.isLive(agentId)) return 'live';
    if (this.options.isHolder()) return 'lost';
    try {
      const entry = await this.read(agentId);
      return entry?.status === 'live' ? 'live' : 'lost';
    } catch {
      return 'unreachable';
    }
  }

  /**
   * Back on the mesh (a reconnect: `'all'`; or these agents heard again): every agent still marked
   * offline for silence is read again, and the lifecycle is told to look for results it missed.
   * One refresh at a time; one asked for meanwhile runs after it.
   */
  refresh(returned: ReadonlySet<string> | 'all' = 'all'): void {
    if (this.refreshing) {
      this.refreshAgain = merge(this.refreshAgain, returned);
      return;
    }
    this.refreshing = this.refreshOnce(returned)
      .catch((err: unknown) =>
        this.options.log('warn', 'shared registry not read again', { err: String(err) }),
      )
      .finally(() => {
        this.refreshing = undefined;
        const again = this.refreshAgain;
        this.refreshAgain = undefined;
        if (again !== undefined) this.refresh(again);
      });
  }

  private async refreshOnce(returned: ReadonlySet<string> | 'all'): Promise<void> {
    const ids = [...this.silent.entries()]
      .filter(([id]) => this.options.registry.get(id)?.status === 'offline')
      .sort((x, y) => y[1].at - x[1].at)
      .slice(0, MAX_READS_PER_REFRESH)
      .map(([id]) => id);
    const revived = new Set(returned === 'all' ? [] : returned);
    const outcomes = await Promise.all(ids.map((id) => this.reviveIfShared(id, this.heartbeatMs(id))));
    ids.forEach((id, i) => outcomes[i] && revived.add(id));
    if (ids.length > 0)
      this.options.log('info', 'shared registry read after being cut off', {
        silent: ids.length,
        live_again: ids.filter((_, i) => outcomes[i]).length,
      });
    this.options.onReturn?.(returned === 'all' ? 'all' : revived);
  }

  /** Reads the agent's shared entry; live there → live here for `graceMs`. False when unreadable. */
  private async reviveIfShared(agentId: string, graceMs: number): Promise<boolean> {
    let entry: RegisteredAgent | null;
    try {
      entry = await this.read(agentId);
    } catch {
      return false;
    }
    const { registry } = this.options;
    if (entry?.status === 'live' && registry.reviveFromShared(entry, graceMs)) {
      this.options.log('info', 'agent live again: the shared registry still holds it live', {
        agent: agentId,
      });
    }
    return registry.isLive(agentId);
  }

  /** One read per agent at a time, its answer reused for a moment. */
  private read(agentId: string): Promise<RegisteredAgent | null> {
    const now = this.now();
    const recent = this.reads.get(agentId);
    if (recent && now - recent.at < READ_REUSE_MS) return recent.entry;
    const entry = withTimeout(this.options.readShared(agentId), READ_TIMEOUT_MS);
    this.reads.set(agentId, { at: now, entry });
    // Only the last moment's reads are kept (they are reused for a second at most).
    if (this.reads.size > 1_000)
      for (const [id, r] of this.reads) if (now - r.at >= READ_REUSE_MS) this.reads.delete(id);
    return entry;
  }

  private markSilent(agentId: string, tags: readonly string[]): void {
    this.forgetSilent(agentId);
    this.silent.set(agentId, { at: this.now(), tags });
    for (const tag of tags) {
      let ids = this.silentByTag.get(tag);
      if (!ids) this.silentByTag.set(tag, (ids = new Set()));
      ids.add(agentId);
    }
    if (this.silent.size > MAX_SILENT) {
      const oldest = this.silent.keys().next().value;
      if (oldest !== undefined) this.forgetSilent(oldest);
    }
  }

  /** True when the agent was marked silent (and is not any more). */
  private forgetSilent(agentId: string): boolean {
    const entry = this.silent.get(agentId);
    if (!entry) return false;
    this.silent.delete(agentId);
    for (const tag of entry.tags) {
      const ids = this.silentByTag.get(tag);
      ids?.delete(agentId);
      if (ids?.size === 0) this.silentByTag.delete(tag);
    }
    return true;
  }

  /** One heartbeat period of the agent: how long a revival without a sign of life lasts. */
  private heartbeatMs(agentId: string): number {
    return (this.options.registry.get(agentId)?.heartbeatSeconds ?? 5) * 1000;
  }
}

/**
 * Reads an agent's entry in the `amf_agents` bucket from the bucket's stream leader (a message get,
 * not a direct get that a lagging replica may answer): null when there is none or it was deleted;
 * rejects when no leader answers (this coordinator is cut off, the bucket is electing its leader).
 */
export async function readAgentFromLeader(
  jsm: JetStreamManager,
  agentId: string,
): Promise<RegisteredAgent | null> {
  const msg = await jsm.streams.getMessage(`KV_${AGENTS_BUCKET}`, {
    last_by_subj: `$KV.${AGENTS_BUCKET}.${kvKey(agentId)}`,
  });
  if (!msg || msg.data.length === 0) return null;
  const operation = msg.header?.get('KV-Operation');
  if (operation === 'DEL' || operation === 'PURGE') return null;
  return msg.json<RegisteredAgent>();
}

function merge(
  a: ReadonlySet<string> | 'all' | undefined,
  b: ReadonlySet<string> | 'all',
): ReadonlySet<string> | 'all' {
  if (a === undefined) return b;
  if (a === 'all' || b === 'all') return 'all';
  return new Set([...a, ...b]);
}

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new AmfError('TIMEOUT', `no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
