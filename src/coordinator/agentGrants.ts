/**
 * Grants each admitted agent its own NATS user and takes it away again (docs/security.md). The
 * users follow the registry: an agent that is live and bound to a key gets an nkey user allowed to
 * pull the work of its admitted tags; when it goes offline (goodbye, missed heartbeats), is denied
 * on re-advertisement or is forgotten, its user is removed and the server disconnects it. An
 * enrolled key (an approved agent, an invite redeemed: registry/enrollments.ts) has its user from
 * its enrollment on, live or not, so an agent without the data dir's join credential can connect
 * and send the signed heartbeat that makes it live; until then the lifecycle takes nothing from it.
 * A pending agent (heard on mDNS only) gets nothing. Only for the nats-server the coordinator
 * spawns: an external NATS or a cluster asks the auth callout, which decides from the same keys.
 */
import type { AgentUser } from '../fabric/agentUsers.js';
import { ROLE_USERS, SYSTEM_USER } from '../fabric/credentials.js';
import type { PermissionViolation } from '../fabric/natsServer/supervisor.js';
import type { LogFn } from '../log.js';
import type { AgentRegistry } from '../registry/agentRegistry.js';
import type { PolicyNotices } from '../registry/policyNotices.js';
import { BoundedCache } from '../util/boundedCache.js';

export interface AgentGrantsOptions {
  registry: AgentRegistry;
  /** Writes the users into the server's config and reloads it. */
  reload: (agents: readonly AgentUser[]) => Promise<void>;
  log: LogFn;
}

export class AgentGrants {
  private dirty = false;
  private running: Promise<void> | undefined;
  /** The server starts with no agent users: nothing to reload until the first one is admitted. */
  private applied = '[]';
  private closed = false;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly options: AgentGrantsOptions) {}

  start(): void {
    const offAgents = this.options.registry.onChange(() => this.schedule());
    const offEnrollments = this.options.registry.onEnrollment(() => this.schedule());
    this.unsubscribe = () => {
      offAgents();
      offEnrollments();
    };
    this.schedule();
  }

  /** The users the registry calls for now: live agents bound to a key, and enrolled keys. */
  current(): AgentUser[] {
    return [...this.options.registry.grantedKeys()]
      .map(([nkey, granted]) => ({ nkey, tags: [...granted.tags] }))
      .sort((a, b) => (a.nkey < b.nkey ? -1 : a.nkey > b.nkey ? 1 : 0));
  }

  /** Resolves once every change seen so far is in the server's config (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.running) await this.running;
  }

  close(): void {
    this.closed = true;
    this.unsubscribe?.();
  }

  /** Coalesces changes: one reload at a time, and one more if anything changed meanwhile. */
  private schedule(): void {
    if (this.closed) return;
    this.dirty = true;
    this.running ??= this.apply().finally(() => {
      this.running = undefined;
    });
  }

  private async apply(): Promise<void> {
    while (this.dirty && !this.closed) {
      this.dirty = false;
      const users = this.current();
      const fingerprint = JSON.stringify(users);
      if (fingerprint === this.applied) continue;
      try {
        await this.options.reload(users);
        this.applied = fingerprint;
      } catch (err) {
        this.options.log('warn', 'agent NATS users not applied; retrying with the next change', {
          err: err instanceof Error ? err.message : String(err),
        });
      }
    }
  }
}

/**
 * Reports what the server refused an agent (read from its log) as `amf.policy.warning` naming the
 * agent: a NATS refusal is otherwise silent to everyone but the offender. Deduplicated per agent and
 * subject for 10 s.
 */
/** The coordinator's own NATS users: their refusals are the coordinator's bugs, not an agent's act. */
const COORDINATOR_SIDE_USERS: ReadonlySet<string> = new Set([
  ROLE_USERS.coordinator,
  ROLE_USERS.watcher,
  ROLE_USERS.connector,
  SYSTEM_USER,
]);

export function permissionViolationReporter(
  registry: AgentRegistry,
  notices: PolicyNotices,
): (violation: PermissionViolation) => void {
  const recent = new BoundedCache<true>(10_000, 10_000);
  return (violation) => {
    // Role users (the coordinator's own connections) are not reported: only agents and the join door.
    if (COORDINATOR_SIDE_USERS.has(violation.user)) return;
    const key = `${violation.kind}|${violation.user}|${violation.subject}`;
    if (recent.get(key) !== undefined) return;
    recent.set(key, true);
    // An nkey user is named by its key; a user the auth callout issued, by its agent id.
    // A pending listing names a key nobody proved: it names no offender.
    const agent = registry
      .list()
      .find(
        (a) =>
          a.status !== 'pending' &&
          (a.record.nkey === violation.user || a.record.agent_id === violation.user),
      )?.record.agent_id;
    const who = agent ?? (violation.user.startsWith('U') ? `key ${violation.user}` : violation.user);
    notices.warn({
      reason: 'permission_violation',
      message: `NATS refused ${who} to ${violation.kind} ${violation.subject}: not allowed for this agent`,
      agent_id: who,
      details: { kind: violation.kind, subject: violation.subject, nats_user: violation.user },
    });
  };
}
