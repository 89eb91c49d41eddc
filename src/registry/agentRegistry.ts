/**
 * The coordinator's view of the mesh: admitted agents, whether each is live, which capability tags
 * are served, which agent id is bound to which key, and which keys are enrolled (enrollments.ts).
 * Pure state with an injected clock; persistence to the KV buckets is the caller's business
 * (coordinator/sharedState.ts, coordinator/enrollmentStore.ts), so this stays testable without NATS.
 */
import type { AgentRecord } from '../events/agentRecord.js';
import { AmfError } from '../errors.js';
import { enrollmentExpired, enrollmentOf, type Enrollment, type EnrollmentRequest } from './enrollments.js';
import type { Disablement } from './disablements.js';

/**
 * `unverified`: admitted by policy, but what it advertised could not be checked against its card
 * (the card did not load, or it names another agent). Shown in /agents with the reason; never
 * offered tasks, tools or routes — everything that serves the mesh asks for `live`.
 *
 * `pending`: heard only on mDNS, judged (validation, watcher, policy), and not proven: no data-dir
 * join credential, invite or approval stands behind it. Listed with where it was heard, granted no
 * NATS user, bound to no key, served nothing, until the operator approves it (docs/admission.md).
 */
export type AgentStatus = 'live' | 'offline' | 'unverified' | 'pending';

/** Where an mDNS advertisement was heard: the packet's source address and the service instance. */
export interface Sighting {
  source: string;
  instance?: string;
}

/**
 * The operator's approval of an agent that advertised no key (mDNS only): it stays tied to the
 * address it was approved from, since nothing else can tell it apart from a neighbour using its id.
 */
export interface KeylessApproval {
  source: string;
  approved_at: string;
}

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
  /** A pending agent: where its mDNS advertisement was heard. */
  heardFrom?: Sighting;
  /** An mDNS-only agent without a key that the operator approved (its liveness comes from mDNS). */
  approval?: KeylessApproval;
}

export type RegistryChange =
  | { kind: 'admitted'; agent: RegisteredAgent }
  | { kind: 'changed'; agent: RegisteredAgent; previous: AgentRecord }
  /**
   * Heard again; `fromShared`: revived from the shared registry (another coordinator still hears
   * it) after this one had marked it offline for silence, which is nothing new for that registry.
   */
  | { kind: 'online'; agent: RegisteredAgent; fromShared?: true }
  /** Admitted, or re-advertised, without a verified card: listed, never served. */
  | { kind: 'unverified'; agent: RegisteredAgent; reason: string }
  | { kind: 'offline'; agent: RegisteredAgent; reason: string }
  /** Heard on mDNS and judged, not proven: listed, never served (a new or changed listing). */
  | { kind: 'pending'; agent: RegisteredAgent }
  /** A pending agent with a key, approved: its key is enrolled, and it is offline until it connects. */
  | { kind: 'approved'; agent: RegisteredAgent };

/** An enrollment added or removed (`local`: here; `store`: read from the shared bucket). */
export interface EnrollmentChange {
  kind: 'enrolled' | 'unenrolled';
  enrollment: Enrollment;
  origin: 'local' | 'store';
}

/** An agent disabled or enabled (`local`: here; `store`: read from the shared bucket). */
export interface DisablementChange {
  kind: 'disabled' | 'enabled';
  agentId: string;
  /** The record (for `enabled`: the one that was lifted). */
  disablement: Disablement;
  origin: 'local' | 'store';
}

/** A key that may log in to NATS now, with the agent and tags its user is for. */
export interface GrantedKey {
  agentId: string | undefined;
  tags: readonly string[];
}

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
  /** Enrolled keys by nkey (enrollments.ts). */
  private readonly enrolled = new Map<string, Enrollment>();
  private readonly enrollmentListeners = new Set<(change: EnrollmentChange) => void>();
  /**
   * Disabled agents by id (disablements.ts). Kept apart from the list, like the key bindings: the
   * operator's word outlives the agent going offline or being re-admitted; only enable and forget
   * lift it.
   */
  private readonly disabledAgents = new Map<string, Disablement>();
  private readonly disablementListeners = new Set<(change: DisablementChange) => void>();
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

  /** Registers a listener for enrollments added and removed. */
  onEnrollment(listener: (change: EnrollmentChange) => void): () => void {
    this.enrollmentListeners.add(listener);
    return () => this.enrollmentListeners.delete(listener);
  }

  private emitEnrollment(change: EnrollmentChange): void {
    for (const l of this.enrollmentListeners) l(change);
  }

  /** Whether an advertisement for this agent would need to be judged again (new or changed). */
  needsJudgement(record: AgentRecord): boolean {
    const known = this.agents.get(record.agent_id);
    return known === undefined || !sameAdvertisement(known.record, record);
  }

  /**
   * Records an admitted advertisement (with what admission verified) or a heartbeat of an admitted
   * agent (no `verification`: the agent keeps the verification state it has). Only what came through
   * a proven door is admitted: a NATS heartbeat (signed with its key, sent with the data dir's join
   * credential or an enrolled key's own login), or an approved keyless agent's mDNS record. A pending
   * listing of the same id is replaced by it.
   */
  admit(record: AgentRecord, verification?: Verification): RegistryChange | undefined {
    const now = this.now();
    const heartbeatSeconds = record.heartbeat_seconds ?? this.options.defaultHeartbeatSeconds;
    // An id is bound to one key: a record with another (or none) is not this agent. Admission
    // refuses such advertisements first; this keeps the invariant even when two race.
    const bound = this.keyBindings.get(record.agent_id);
    if (bound !== undefined && record.nkey !== bound) return undefined;
    const listed = this.agents.get(record.agent_id);
    // A pending listing is hearsay: the proven advertisement starts the agent afresh.
    const known = listed?.status === 'pending' ? undefined : listed;
    if (listed && !known) this.agents.delete(record.agent_id);
    this.bindKey(record);
    this.keepEnrollment(record);
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
    // A pending listing proves nothing: its key is not bound (and a stale one is swept).
    if (agent.status !== 'pending') this.bindKey(agent.record);
    if (known && known.lastSeen >= agent.lastSeen) return;
    this.agents.set(agent.record.agent_id, { ...agent });
    this.tagCache = undefined;
  }

  /**
   * An agent this coordinator marked offline for silence that the shared registry still holds live
   * (another coordinator hears its heartbeats: this one was cut off from the mesh): live again here,
   * for `graceMs` unless its heartbeats resume. Only the same advertisement under the same key is
   * revived; false when nothing changed.
   */
  reviveFromShared(shared: RegisteredAgent, graceMs: number): boolean {
    const id = shared.record.agent_id;
    const known = this.agents.get(id);
    if (!known || known.status !== 'offline' || shared.status !== 'live') return false;
    if (known.record.nkey !== shared.record.nkey || this.keyBindings.get(id) !== known.record.nkey)
      return false;
    if (!sameAdvertisement(known.record, shared.record)) return false;
    const silenceMs = known.heartbeatSeconds * 1000 * this.options.offlineAfterMissed;
    known.lastSeen = Math.max(known.lastSeen, this.now() - Math.max(0, silenceMs - graceMs));
    known.status = 'live';
    this.emit({ kind: 'online', agent: known, fromShared: true });
    return true;
  }

  /**
   * Lists an mDNS advertisement that no proof stands behind as `pending` (or updates the listing).
   * Nothing happens when the id is bound to a key or held by an agent admitted through a proven
   * door: hearsay never replaces proof. Returns the change, if any.
   */
  listPending(record: AgentRecord, verification: Verification, heard: Sighting): RegistryChange | undefined {
    const id = record.agent_id;
    if (this.keyBindings.has(id)) return undefined;
    const known = this.agents.get(id);
    if (known && known.status !== 'pending') return undefined;
    const now = this.now();
    if (known && sameAdvertisement(known.record, record) && known.heardFrom?.source === heard.source) {
      known.lastSeen = now;
      return undefined;
    }
    if (!known) this.evictIfFull();
    const agent: RegisteredAgent = {
      record,
      status: 'pending',
      admittedAt: known?.admittedAt ?? new Date(now).toISOString(),
      lastSeen: now,
      heartbeatSeconds: record.heartbeat_seconds ?? this.options.defaultHeartbeatSeconds,
      heardFrom: { ...heard },
    };
    applyVerification(agent, verification);
    this.agents.set(id, agent);
    const change: RegistryChange = { kind: 'pending', agent };
    this.emit(change);
    return change;
  }

  /** A pending agent's unchanged advertisement was heard again: it stays listed. */
  heard(agentId: string): void {
    const agent = this.agents.get(agentId);
    if (agent?.status === 'pending') agent.lastSeen = this.now();
  }

  /**
   * The operator approves a pending agent. With a key: the key is bound to the id and enrolled, so
   * the agent gets its NATS user and becomes live with its first signed heartbeat (until then it is
   * listed `offline`). Without a key: it becomes live at once, tied to the address it was heard
   * from, and its mDNS record keeps it live. `expectedNkey`, when given, must be the key the listing
   * names (so a listing replaced after the operator looked at it is not approved by mistake).
   * Throws AmfError NOT_FOUND / INVALID_REQUEST saying why it cannot.
   */
  approve(agentId: string, expectedNkey?: string): { agent: RegisteredAgent; enrollment?: Enrollment } {
    const agent = this.agents.get(agentId);
    if (!agent) throw new AmfError('NOT_FOUND', `no agent ${agentId} is known to this coordinator`);
    if (agent.status !== 'pending')
      throw new AmfError(
        'INVALID_REQUEST',
        `agent ${agentId} is ${agent.status}: only a pending agent is approved`,
      );
    const nkey = agent.record.nkey;
    if (expectedNkey !== undefined && expectedNkey !== (nkey ?? ''))
      throw new AmfError(
        'INVALID_REQUEST',
        `agent ${agentId} now advertises ${nkey ? `key ${nkey}` : 'no key'}, not ${expectedNkey || 'no key'}: look at it again before approving`,
      );
    const now = this.now();
    if (nkey === undefined) {
      agent.approval = {
        source: agent.heardFrom?.source ?? 'unknown',
        approved_at: new Date(now).toISOString(),
      };
      delete agent.heardFrom;
      agent.lastSeen = now;
      agent.status = agent.unverified ? 'unverified' : 'live';
      const change: RegistryChange = agent.unverified
        ? { kind: 'unverified', agent, reason: agent.unverified.reason }
        : { kind: 'admitted', agent };
      this.emit(change);
      return { agent };
    }
    const enrollment = this.enroll({
      nkey,
      agentId,
      tags: agent.record.capability_tags ?? [],
      via: 'approval',
    });
    delete agent.heardFrom;
    agent.status = 'offline';
    this.emit({ kind: 'approved', agent });
    return { agent, enrollment };
  }

  /**
   * Enrolls a key (an approval, or an invite redeemed): it may log in to NATS from now on, and with
   * `agentId` that id is bound to it. Throws AmfError INVALID_REQUEST when the id is bound to another
   * key (forget the agent first) or the request is malformed.
   */
  enroll(request: EnrollmentRequest): Enrollment {
    let enrollment: Enrollment;
    try {
      enrollment = enrollmentOf(request, this.now());
    } catch (err) {
      throw new AmfError('INVALID_REQUEST', `enrollment refused: ${(err as Error).message}`);
    }
    const id = enrollment.agent_id;
    const bound = id === undefined ? undefined : this.keyBindings.get(id);
    if (id !== undefined && bound !== undefined && bound !== enrollment.nkey)
      throw new AmfError(
        'INVALID_REQUEST',
        `${id} is bound to key ${bound}; forget the agent before enrolling key ${enrollment.nkey} for it`,
      );
    const other = this.enrolled.get(enrollment.nkey)?.agent_id;
    if (other !== undefined && id !== undefined && other !== id)
      throw new AmfError('INVALID_REQUEST', `key ${enrollment.nkey} is already enrolled for ${other}`);
    if (id !== undefined) this.keyBindings.set(id, enrollment.nkey);
    this.enrolled.set(enrollment.nkey, enrollment);
    this.emitEnrollment({ kind: 'enrolled', enrollment, origin: 'local' });
    return enrollment;
  }

  /** Takes an enrollment read from the shared store (another coordinator, or before a restart). */
  restoreEnrollment(enrollment: Enrollment): void {
    const known = this.enrolled.get(enrollment.nkey);
    if (known && JSON.stringify(known) === JSON.stringify(enrollment)) return;
    const id = enrollment.agent_id;
    if (id !== undefined && !this.keyBindings.has(id)) this.keyBindings.set(id, enrollment.nkey);
    this.enrolled.set(enrollment.nkey, enrollment);
    this.emitEnrollment({ kind: 'enrolled', enrollment, origin: 'store' });
  }

  /** Removes an enrollment (forgotten, or deleted from the shared store by another coordinator). */
  unenroll(nkey: string, origin: 'local' | 'store' = 'local'): void {
    const enrollment = this.enrolled.get(nkey);
    if (!enrollment) return;
    this.enrolled.delete(nkey);
    this.emitEnrollment({ kind: 'unenrolled', enrollment, origin });
  }

  /** The enrollment of `nkey`, if it is enrolled. */
  enrollment(nkey: string): Enrollment | undefined {
    return this.enrolled.get(nkey);
  }

  /** Every enrollment. */
  enrollments(): Enrollment[] {
    return [...this.enrolled.values()];
  }

  /** An admitted agent's key that was enrolled with a deadline keeps its enrollment for good. */
  private keepEnrollment(record: AgentRecord): void {
    const e = record.nkey === undefined ? undefined : this.enrolled.get(record.nkey);
    if (!e || (e.expires_at === undefined && e.agent_id !== undefined)) return;
    const kept: Enrollment = { ...e, agent_id: record.agent_id };
    delete kept.expires_at;
    this.enrolled.set(kept.nkey, kept);
    this.emitEnrollment({ kind: 'enrolled', enrollment: kept, origin: 'local' });
  }

  /**
   * The keys that may log in to NATS now: each live agent's bound key (with its admitted tags), and
   * each enrolled key not past its deadline, whether its agent is live yet or not (with the tags it
   * was enrolled for), so an approved or invited agent can connect and prove itself. A login is
   * worth nothing more: claims, results and tools are taken only from `live` agents.
   */
  grantedKeys(): Map<string, GrantedKey> {
    const keys = new Map<string, GrantedKey>();
    for (const agent of this.agents.values()) {
      const key = agent.record.nkey;
      if (agent.status === 'live' && key !== undefined && this.keyBindings.get(agent.record.agent_id) === key)
        keys.set(key, { agentId: agent.record.agent_id, tags: agent.record.capability_tags ?? [] });
    }
    const now = this.now();
    for (const e of this.enrolled.values()) {
      if (keys.has(e.nkey) || enrollmentExpired(e, now)) continue;
      keys.set(e.nkey, { agentId: e.agent_id, tags: e.tags });
    }
    return keys;
  }

  /** The operator's approval of a keyless mDNS agent, if it has one. */
  keylessApproval(agentId: string): KeylessApproval | undefined {
    const agent = this.agents.get(agentId);
    return agent && agent.record.nkey === undefined ? agent.approval : undefined;
  }

  /**
   * The operator disables an agent (disablements.ts): no new work, no routes; it stays connected and
   * finishes what it holds. Only an agent this coordinator knows (listed, or still bound to its key)
   * and not `pending` (approve or forget a pending one). Returns the record; one already there is
   * kept. Throws AmfError NOT_FOUND / INVALID_REQUEST.
   */
  disable(agentId: string, by: string, from?: string): Disablement {
    const agent = this.agents.get(agentId);
    if (!agent && !this.keyBindings.has(agentId))
      throw new AmfError('NOT_FOUND', `no agent ${agentId} is known to this coordinator`);
    if (agent?.status === 'pending')
      throw new AmfError(
        'INVALID_REQUEST',
        `agent ${agentId} is pending: it is offered nothing already; approve it or forget it`,
      );
    const known = this.disabledAgents.get(agentId);
    if (known) return known;
    const disablement: Disablement = {
      agent_id: agentId,
      by,
      ...(from !== undefined ? { from } : {}),
      disabled_at: new Date(this.now()).toISOString(),
    };
    this.setDisabled(disablement, 'local');
    return disablement;
  }

  /** The operator enables a disabled agent again; returns the lifted record, undefined if it was not. */
  enable(agentId: string): Disablement | undefined {
    return this.liftDisabled(agentId, 'local');
  }

  /** Takes a disablement read from the shared store (another coordinator, or before a restart). */
  restoreDisablement(disablement: Disablement): void {
    const known = this.disabledAgents.get(disablement.agent_id);
    if (known && JSON.stringify(known) === JSON.stringify(disablement)) return;
    this.setDisabled(disablement, 'store');
  }

  /** Lifts a disablement deleted from the shared store (enabled or forgotten elsewhere). */
  dropDisablement(agentId: string): void {
    this.liftDisabled(agentId, 'store');
  }

  /** The record of a disabled agent; undefined when it is not disabled. */
  disablement(agentId: string): Disablement | undefined {
    return this.disabledAgents.get(agentId);
  }

  /** True when the operator disabled the agent: it gets no new work and no routes. */
  isDisabled(agentId: string): boolean {
    return this.disabledAgents.has(agentId);
  }

  /** The disabled agents admitted for `tag`: a work offer of that tag names them as not for them. */
  disabledFor(tag: string): string[] {
    const ids: string[] = [];
    for (const id of this.disabledAgents.keys())
      if ((this.agents.get(id)?.record.capability_tags ?? []).includes(tag)) ids.push(id);
    return ids;
  }

  /** Registers a listener for agents disabled and enabled. */
  onDisablement(listener: (change: DisablementChange) => void): () => void {
    this.disablementListeners.add(listener);
    return () => this.disablementListeners.delete(listener);
  }

  private setDisabled(disablement: Disablement, origin: 'local' | 'store'): void {
    this.disabledAgents.set(disablement.agent_id, disablement);
    this.tagCache = undefined;
    const change: DisablementChange = {
      kind: 'disabled',
      agentId: disablement.agent_id,
      disablement,
      origin,
    };
    for (const l of this.disablementListeners) l(change);
  }

  private liftDisabled(agentId: string, origin: 'local' | 'store'): Disablement | undefined {
    const disablement = this.disabledAgents.get(agentId);
    if (!disablement) return undefined;
    this.disabledAgents.delete(agentId);
    this.tagCache = undefined;
    const change: DisablementChange = { kind: 'enabled', agentId, disablement, origin };
    for (const l of this.disablementListeners) l(change);
    return disablement;
  }

  /** Marks an agent offline (goodbye, silence, or a denied re-advertisement). */
  markOffline(agentId: string, reason: string): boolean {
    const agent = this.agents.get(agentId);
    // A pending listing was never online: it is dropped (remove), not marked offline.
    if (!agent || agent.status === 'offline' || agent.status === 'pending') return false;
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
   * The operator forgets an agent, live or not: removed (a live one is marked offline first, which
   * takes its NATS user away), its id unbound from its key and the key's enrollment dropped, so the
   * next admission of that id binds whatever key it advertises (how a key is rotated, a lost key
   * replaced, or an impostor that got in thrown out).
   */
  forget(agentId: string): void {
    const bound = this.keyBindings.get(agentId);
    this.remove(agentId, 'forgotten');
    this.keyBindings.delete(agentId);
    // Forgotten is a clean slate: the id may come back (with any key) as a new agent.
    this.liftDisabled(agentId, 'local');
    for (const e of [...this.enrolled.values()])
      if (e.agent_id === agentId || (bound !== undefined && e.nkey === bound)) this.unenroll(e.nkey);
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

  /**
   * Marks offline every live agent whose heartbeats stopped, drops pending listings no longer heard
   * and unused enrollments past their deadline; returns the ids marked offline.
   */
  sweep(): string[] {
    const now = this.now();
    const gone: string[] = [];
    for (const e of [...this.enrolled.values()]) if (enrollmentExpired(e, now)) this.unenroll(e.nkey);
    for (const agent of [...this.agents.values()]) {
      if (agent.status === 'offline') continue;
      const silentMs = now - agent.lastSeen;
      if (agent.status === 'pending') {
        if (silentMs > agent.heartbeatSeconds * 1000 * this.options.offlineAfterMissed) {
          this.agents.delete(agent.record.agent_id);
          this.tagCache = undefined;
        }
        continue;
      }
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

  /** True when the agent counts in {@link liveTags} for `tag`: it is offered new work of that tag. */
  offeredFor(agentId: string, tag: string): boolean {
    const agent = this.agents.get(agentId);
    return !!agent && this.takesNewWork(agent) && (agent.record.capability_tags ?? []).includes(tag);
  }

  // A draining agent finishes what it holds but claims nothing new, and neither does one the
  // operator disabled: their tags are not offered.
  private takesNewWork(agent: RegisteredAgent): boolean {
    return (
      agent.status === 'live' &&
      agent.record.status !== 'draining' &&
      !this.disabledAgents.has(agent.record.agent_id)
    );
  }

  /** Number of live agents serving each tag (agents that take new work: not draining, not disabled). */
  liveTags(): ReadonlyMap<string, number> {
    if (!this.tagCache) {
      const tags = new Map<string, number>();
      for (const agent of this.agents.values()) {
        if (!this.takesNewWork(agent)) continue;
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
    // Forget the pending (else offline, else unverified) agent seen longest ago; live agents stay.
    let oldest: RegisteredAgent | undefined;
    for (const status of ['pending', 'offline', 'unverified'] as const) {
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
