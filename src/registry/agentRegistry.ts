/**
 * The coordinator's view of the mesh: admitted agents, whether each is live, and which capability
 * tags are served. Pure state with an injected clock; persistence to the KV bucket is the caller's
 * business (see registryStore.ts), so this stays testable without NATS.
 */
import type { AgentRecord } from '../events/agentRecord.js';

/**
 * `unverified`: admitted by policy, but what it advertised could not be checked against its card
 * (the card did not load, or it names another agent). Shown in /agents with the reason; never
 * offered tasks, tools or routes — everything that serves the mesh asks for `live`.
 */
export type AgentStatus = 'live' | 'offline' | 'unverified';

/** Why an agent is `unverified`: a stable code (`card_fetch_failed`, `card_mismatch`) and a sentence. */
export interface Unverified {
  reason: string;
  message: string;
}

/** What admission learned about an advertisement beyond policy: its card checked out, or not. */
export type Verification =
  { verified: true; card?: Record<string, unknown> } | { verified: false; reason: string; message: string };

export interface RegisteredAgent {
  record: AgentRecord;
  status: AgentStatus;
  admittedAt: string;
  /** Epoch ms of the last heartbeat. */
  lastSeen: number;
  /** Heartbeat period the agent announced (seconds). */
  heartbeatSeconds: number;
  /** The agent's card, fetched at admission (SSRF-guarded). */
  card?: Record<string, unknown>;
  /** Set while the agent is admitted but not verified (kept across offline spells). */
  unverified?: Unverified;
}

export type RegistryChange =
  | { kind: 'admitted'; agent: RegisteredAgent }
  | { kind: 'changed'; agent: RegisteredAgent; previous: AgentRecord }
  | { kind: 'online'; agent: RegisteredAgent }
  /** Admitted, or re-advertised, without a verified card: listed, never served. */
  | { kind: 'unverified'; agent: RegisteredAgent; reason: string }
  | { kind: 'offline'; agent: RegisteredAgent; reason: string };

export interface RegistryOptions {
  defaultHeartbeatSeconds: number;
  /** Missed heartbeats before an agent is marked offline. */
  offlineAfterMissed: number;
  /** Upper bound on the number of agents remembered (live or offline). */
  maxAgents?: number;
  now?: () => number;
}

/** Upper bound on remembered key bindings (ten times the default list bound). */
const MAX_KEY_BINDINGS = 100_000;

/** Compares the fields of an advertisement that matter for routing and admission. */
function sameAdvertisement(a: AgentRecord, b: AgentRecord): boolean {
  return (
    a.endpoint === b.endpoint &&
    a.trust_domain === b.trust_domain &&
    a.visibility === b.visibility &&
    a.card_url === b.card_url &&
    a.mcp_endpoint === b.mcp_endpoint &&
    a.nkey === b.nkey &&
    (a.capability_tags ?? []).join(',') === (b.capability_tags ?? []).join(',') &&
    a.protocols_supported.join(',') === b.protocols_supported.join(',')
  );
}

/** In-memory registry of admitted agents. */
export class AgentRegistry {
  private readonly agents = new Map<string, RegisteredAgent>();
  /**
   * Agent id → the nkey it was first admitted with. Outlives the agent going offline, being removed
   * after a denied re-advertisement or evicted: only `forget` (the operator) unbinds an id, so a new
   * key cannot take over an agent that is merely away. Persisted through the agents' KV entries.
   */
  private readonly keyBindings = new Map<string, string>();
  private readonly listeners = new Set<(change: RegistryChange) => void>();
  private readonly cardListeners = new Set<(agentId: string) => void>();
  private readonly now: () => number;
  private tagCache: Map<string, number> | undefined;

  constructor(private readonly options: RegistryOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Registers a listener for admissions, changes and liveness transitions. */
  onChange(listener: (change: RegistryChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(change: RegistryChange): void {
    this.tagCache = undefined;
    for (const l of this.listeners) l(change);
  }

  /** Whether an advertisement for this agent would need to be judged again (new or changed). */
  needsJudgement(record: AgentRecord): boolean {
    const known = this.agents.get(record.agent_id);
    return known === undefined || !sameAdvertisement(known.record, record);
  }

  /**
   * Records an admitted advertisement (with what admission verified) or a heartbeat of an admitted
   * agent (no `verification`: the agent keeps the verification state it has).
   */
  admit(record: AgentRecord, verification?: Verification): RegistryChange | undefined {
    const now = this.now();
    const heartbeatSeconds = record.heartbeat_seconds ?? this.options.defaultHeartbeatSeconds;
    // An id is bound to one key: a record with another (or none) is not this agent. Admission
    // refuses such advertisements first; this keeps the invariant even when two race.
    const bound = this.keyBindings.get(record.agent_id);
    if (bound !== undefined && record.nkey !== bound) return undefined;
    const known = this.agents.get(record.agent_id);
    this.bindKey(record);
    if (!known) {
      this.evictIfFull();
      const agent: RegisteredAgent = {
        record,
        status: 'live',
        admittedAt: new Date(now).toISOString(),
        lastSeen: now,
        heartbeatSeconds,
      };
      applyVerification(agent, verification);
      if (agent.unverified) agent.status = 'unverified';
      this.agents.set(record.agent_id, agent);
      const change: RegistryChange = agent.unverified
        ? { kind: 'unverified', agent, reason: agent.unverified.reason }
        : { kind: 'admitted', agent };
      this.emit(change);
      if (agent.card) for (const l of this.cardListeners) l(record.agent_id);
      return change;
    }
    const previous = known.record;
    const previousStatus = known.status;
    const wasUnverified = known.unverified !== undefined;
    known.lastSeen = now;
    known.heartbeatSeconds = heartbeatSeconds;
    known.record = record;
    applyVerification(known, verification);
    if ((previous.status ?? 'active') !== (record.status ?? 'active')) this.tagCache = undefined;
    if (known.unverified) {
      known.status = 'unverified';
      if (previousStatus === 'unverified' && wasUnverified && sameAdvertisement(previous, record))
        return undefined;
      const change: RegistryChange = { kind: 'unverified', agent: known, reason: known.unverified.reason };
      this.emit(change);
      return change;
    }
    if (verification?.verified && verification.card) for (const l of this.cardListeners) l(record.agent_id);
    if (previousStatus === 'unverified') {
      // Verified at last: from now on the mesh may offer it work, as for a first admission.
      known.status = 'live';
      const change: RegistryChange = { kind: 'admitted', agent: known };
      this.emit(change);
      return change;
    }
    if (!sameAdvertisement(previous, record)) {
      known.status = 'live';
      const change: RegistryChange = { kind: 'changed', agent: known, previous };
      this.emit(change);
      return change;
    }
    if (known.status === 'offline') {
      known.status = 'live';
      const change: RegistryChange = { kind: 'online', agent: known };
      this.emit(change);
      return change;
    }
    return undefined;
  }

  /** Restores an agent from the shared KV store (another coordinator admitted it). */
  restore(agent: RegisteredAgent): void {
    const known = this.agents.get(agent.record.agent_id);
    this.bindKey(agent.record);
    if (known && known.lastSeen >= agent.lastSeen) return;
    this.agents.set(agent.record.agent_id, { ...agent });
    this.tagCache = undefined;
  }

  /** Marks an agent offline (goodbye, silence, or a denied re-advertisement). */
  markOffline(agentId: string, reason: string): boolean {
    const agent = this.agents.get(agentId);
    if (!agent || agent.status === 'offline') return false;
    agent.status = 'offline';
    this.emit({ kind: 'offline', agent, reason });
    return true;
  }

  /** Removes an agent entirely (a changed advertisement that policy now denies). */
  remove(agentId: string, reason: string): void {
    const agent = this.agents.get(agentId);
    if (!agent) return;
    if (agent.status === 'live') this.markOffline(agentId, reason);
    this.agents.delete(agentId);
    this.tagCache = undefined;
  }

  /**
   * The operator forgets an agent: removed, and its id unbound from its key, so the next admission
   * of that id binds whatever key it advertises (how a key is rotated or a lost key replaced).
   */
  forget(agentId: string): void {
    this.remove(agentId, 'forgotten');
    this.keyBindings.delete(agentId);
  }

  /**
   * The key this agent id is bound to (its first admission with a key), whether the agent is live,
   * offline or gone from the list; undefined when it was never admitted with a key or was forgotten.
   */
  boundKey(agentId: string): string | undefined {
    return this.keyBindings.get(agentId);
  }

  /** Binds an id to its first key; a binding is never replaced here (admission refuses other keys). */
  private bindKey(record: AgentRecord): void {
    if (record.nkey === undefined || this.keyBindings.has(record.agent_id)) return;
    if (this.keyBindings.size >= MAX_KEY_BINDINGS) this.dropOneBinding();
    this.keyBindings.set(record.agent_id, record.nkey);
  }

  /**
   * Bounds the bindings: the oldest binding of an id no longer in the list goes first (the list
   * holds up to maxAgents agents, so such ids exist once the bound is reached).
   */
  private dropOneBinding(): void {
    for (const id of this.keyBindings.keys()) {
      if (!this.agents.has(id)) {
        this.keyBindings.delete(id);
        return;
      }
    }
  }

  /** Marks offline every live agent whose heartbeats stopped; returns their ids. */
  sweep(): string[] {
    const now = this.now();
    const gone: string[] = [];
    for (const agent of this.agents.values()) {
      if (agent.status === 'offline') continue;
      const silentMs = now - agent.lastSeen;
      if (silentMs > agent.heartbeatSeconds * 1000 * this.options.offlineAfterMissed) {
        agent.status = 'offline';
        gone.push(agent.record.agent_id);
        this.emit({ kind: 'offline', agent, reason: 'heartbeat_missed' });
      }
    }
    return gone;
  }

  /** Stores the agent card fetched for an admitted agent. */
  attachCard(agentId: string, card: Record<string, unknown>): void {
    const agent = this.agents.get(agentId);
    if (!agent) return;
    agent.card = card;
    for (const l of this.cardListeners) l(agentId);
  }

  /**
   * Registers a listener for cards attached after admission (the MCP federation reads the tool
   * alias from them). Separate from onChange: a card is not an advertisement change.
   */
  onCard(listener: (agentId: string) => void): () => void {
    this.cardListeners.add(listener);
    return () => this.cardListeners.delete(listener);
  }

  get(agentId: string): RegisteredAgent | undefined {
    return this.agents.get(agentId);
  }

  /** True when the agent is admitted and its heartbeats are current. */
  isLive(agentId: string): boolean {
    return this.agents.get(agentId)?.status === 'live';
  }

  /** True when the agent is live and was admitted for `tag` (the tags of its advertisement). */
  admittedFor(agentId: string, tag: string): boolean {
    const agent = this.agents.get(agentId);
    return agent?.status === 'live' && (agent.record.capability_tags ?? []).includes(tag);
  }

  /** Number of live agents serving each tag. */
  liveTags(): ReadonlyMap<string, number> {
    if (!this.tagCache) {
      const tags = new Map<string, number>();
      for (const agent of this.agents.values()) {
        // A draining agent finishes what it holds but claims nothing new: its tags are not offered.
        if (agent.status !== 'live' || agent.record.status === 'draining') continue;
        for (const tag of agent.record.capability_tags ?? []) tags.set(tag, (tags.get(tag) ?? 0) + 1);
      }
      this.tagCache = tags;
    }
    return this.tagCache;
  }

  /** True when at least one live agent serves `tag`. */
  servesTag(tag: string): boolean {
    return (this.liveTags().get(tag) ?? 0) > 0;
  }

  list(): RegisteredAgent[] {
    return [...this.agents.values()];
  }

  private evictIfFull(): void {
    const max = this.options.maxAgents ?? 10_000;
    if (this.agents.size < max) return;
    // Forget the offline (else unverified) agent seen longest ago; live agents are never evicted.
    let oldest: RegisteredAgent | undefined;
    for (const status of ['offline', 'unverified'] as const) {
      for (const a of this.agents.values()) {
        if (a.status === status && (!oldest || a.lastSeen < oldest.lastSeen)) oldest = a;
      }
      if (oldest) break;
    }
    if (oldest) this.agents.delete(oldest.record.agent_id);
  }
}

/** Records what admission verified on `agent`; no verification leaves its state as it was. */
function applyVerification(agent: RegisteredAgent, verification: Verification | undefined): void {
  if (!verification) return;
  if (verification.verified) {
    delete agent.unverified;
    if (verification.card) agent.card = verification.card;
  } else {
    agent.unverified = { reason: verification.reason, message: verification.message };
    // A card that failed verification is not kept: nothing may read a tool alias or skills from it.
    delete agent.card;
  }
}
