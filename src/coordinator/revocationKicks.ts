/**
 * Closes the NATS connections of agents that are no longer admitted, on an external NATS or a
 * cluster whose logins go through the auth callout (docs/security.md). A user JWT the callout issued
 * stays valid until it expires; the spawned server drops a revoked user by config reload, but a
 * server the mesh does not configure can only be told by its system account. So when a key stops
 * being a live agent's (goodbye, missed heartbeats, a denied re-advertisement, forgotten), the
 * coordinator asks every server for the connections of that agent's user
 * (`$SYS.REQ.SERVER.PING.CONNZ`; the callout names each user after its agent id) and kicks each
 * (`$SYS.REQ.SERVER.<server id>.KICK`). The agent's
 * reconnect goes through the callout again and is refused. Without a system user the JWT's expiry
 * (`nats.auth_callout_ttl_seconds`) stays the bound.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { LogFn } from '../log.js';
import { AmfError } from '../errors.js';

/** Subject every server answers with its connections (filtered by the request's options). */
const CONNZ_ALL_SERVERS = '$SYS.REQ.SERVER.PING.CONNZ';
const kickSubject = (serverId: string): string => `$SYS.REQ.SERVER.${serverId}.KICK`;
/** How long to wait for more servers' answers once the last one came, and for all of them. */
const CONNZ_STALL_MS = 300;
const CONNZ_MAX_WAIT_MS = 3_000;
const KICK_TIMEOUT_MS = 2_000;
/** Keys waiting to be kicked; beyond, the oldest is left to its JWT's expiry (and logged). */
const MAX_PENDING = 1_000;
/** Connections looked at per server and key: an agent's own few, with room for abuse. */
const CONNZ_LIMIT = 256;

export interface RevocationKicksOptions {
  /** A connection as the system-account user (the coordinator's, from `system.json`). */
  sys: NatsConnection;
  /** The agent keys that may be connected now, each with its agent id (live and bound). */
  liveKeys: () => ReadonlyMap<string, string>;
  /** Calls back on every registry change; returns the unsubscribe. */
  onRegistryChange: (listener: () => void) => () => void;
  log: LogFn;
}

/** One server's answer to CONNZ, as far as it is read here. */
interface ConnzReply {
  server?: { id?: unknown };
  data?: { connections?: Array<{ cid?: unknown; authorized_user?: unknown }> };
  error?: { description?: unknown };
}

export class RevocationKicks {
  /** Keys that were live at the last look, with their agent ids. */
  private live = new Map<string, string>();
  private readonly pending = new Map<string, string>();
  private draining: Promise<void> | undefined;
  private unsubscribe: (() => void) | undefined;
  private closed = false;

  constructor(private readonly options: RevocationKicksOptions) {}

  start(): void {
    this.live = new Map(this.options.liveKeys());
    this.unsubscribe = this.options.onRegistryChange(() => this.review());
  }

  close(): void {
    this.closed = true;
    this.unsubscribe?.();
    this.pending.clear();
  }

  /** Every key that was live and is not any more is queued for a kick. */
  private review(): void {
    if (this.closed) return;
    const now = this.options.liveKeys();
    for (const [key, agentId] of this.live) if (!now.has(key)) this.queue(key, agentId);
    this.live = new Map(now);
  }

  private queue(key: string, agentId: string): void {
    this.pending.delete(key);
    this.pending.set(key, agentId);
    if (this.pending.size > MAX_PENDING) {
      const [oldest, oldestAgent] = this.pending.entries().next().value as [string, string];
      this.pending.delete(oldest);
      this.options.log('warn', 'too many revoked agents to kick at once; one is left to its JWT expiry', {
        agent_id: oldestAgent,
      });
    }
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined;
    });
  }

  private async drain(): Promise<void> {
    while (!this.closed && this.pending.size > 0) {
      const [key, agentId] = this.pending.entries().next().value as [string, string];
      this.pending.delete(key);
      // Admitted again meanwhile: its connections are legitimate now.
      const live = this.options.liveKeys();
      if (live.has(key) || [...live.values()].includes(agentId)) continue;
      try {
        const kicked = await this.kick(agentId);
        if (kicked > 0)
          this.options.log('info', 'closed the NATS connections of an agent no longer admitted', {
            agent_id: agentId,
            nkey: key,
            connections: kicked,
          });
      } catch (err) {
        this.options.log(
          'warn',
          'could not close a revoked agent’s NATS connections; its JWT expiry still cuts it',
          {
            agent_id: agentId,
            nkey: key,
            err: err instanceof Error ? err.message : String(err),
          },
        );
      }
    }
  }

  /** Kicks every connection of the agent's user on every server that answers; returns how many. */
  private async kick(agentId: string): Promise<number> {
    const { sys } = this.options;
    const request = JSON.stringify({ user: agentId, auth: true, limit: CONNZ_LIMIT });
    const replies = await sys.requestMany(CONNZ_ALL_SERVERS, request, {
      strategy: 'stall',
      stall: CONNZ_STALL_MS,
      maxWait: CONNZ_MAX_WAIT_MS,
    });
    const targets: Array<{ serverId: string; cid: number }> = [];
    for await (const msg of replies) {
      const reply = msg.json<ConnzReply>();
      const serverId = reply.server?.id;
      if (typeof serverId !== 'string' || !/^N[A-Z2-7]{55}$/.test(serverId)) continue;
      for (const c of reply.data?.connections ?? []) {
        // The filter is the server's; the user is checked again so a kick never hits another one.
        if (typeof c.cid === 'number' && c.authorized_user === agentId)
          targets.push({ serverId, cid: c.cid });
      }
    }
    let kicked = 0;
    for (const t of targets) {
      const answer = await sys.request(kickSubject(t.serverId), JSON.stringify({ cid: t.cid }), {
        timeout: KICK_TIMEOUT_MS,
      });
      const error = answer.json<ConnzReply>().error;
      // Gone between the listing and the kick (the agent's own goodbye): nothing left to close.
      if (error && /no such client/i.test(String(error.description))) continue;
      if (error)
        throw new AmfError(
          'UNAVAILABLE',
          `server ${t.serverId} refused to close connection ${t.cid}: ${String(error.description)}`,
        );
      kicked += 1;
    }
    return kicked;
  }
}
