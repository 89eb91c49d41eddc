/**
 * Configured external A2A agents (`a2a.agents` in amf.yaml) joined to the mesh. For each agent the
 * card is fetched (30 s at most); on success a worker starts that serves the agent's skills as
 * capability tags and forwards each task it claims to the remote agent. The worker heartbeats on
 * NATS like any other and is admitted by the same pipeline. A failed fetch is logged and retried
 * with backoff; it never stops the coordinator.
 */
import type { A2aAgentConfig } from '../config/config.js';
import type { RoleCredential } from '../fabric/credentials.js';
import { edgeKeysOf, meshAccessOf, startWorker, type RunningWorker } from './workerApp.js';
import type { WorkerEdgeKeys } from '../edge/worker/workerEdgeGate.js';
import { AmfError } from '../errors.js';
import type { LogFn } from '../log.js';
import { createBridgeHandler } from '../a2aClient/bridgeHandler.js';
import { RemoteA2aAgent } from '../a2aClient/remoteAgent.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import { bridgeTags } from '../a2aClient/skillTags.js';
import { amfCardBlock } from '../util/amfCardBlock.js';

export interface A2aBridgeOptions {
  agents: readonly A2aAgentConfig[];
  natsUrl: string;
  /** A shared role credential (external NATS), or the join credential (spawned NATS, see workerApp). */
  credential?: RoleCredential;
  join?: RoleCredential;
  trustDomain?: string;
  heartbeatSeconds?: number;
  /**
   * Origins of this coordinator's own HTTP edge. An agent there (or one whose card names our NATS
   * fabric) is this mesh itself: bridging it would send every task round in a loop.
   */
  selfOrigins?: string[];
  log?: LogFn;
  /** First retry delay after a failed fetch (default 5 s), doubled up to `maxRetryMs` (default 5 min). */
  retryMs?: number;
  maxRetryMs?: number;
  /** Card fetch timeout (default 30 s). */
  cardTimeoutMs?: number;
  /** Time one forwarded task may take (default 120 s). */
  sendTimeoutMs?: number;
  /** The coordinator's identity: under SPIFFE its calls carry a JWT-SVID bearer (peerBearer.ts). */
  identity?: IdentityProvider;
  /**
   * Whom the bridge workers' edges trust (edge/worker/workerEdgeGate.ts): the coordinator's key, the
   * operator key.
   */
  edgeKeys?: WorkerEdgeKeys;
}

/** What a bridge reports about one configured agent. */
export interface BridgeStatus {
  name: string;
  url: string;
  state: 'connecting' | 'bridged' | 'failed' | 'refused';
  /** After `bridged`: the mesh tags, the worker's agent id and endpoint, the wire in use. */
  tags?: string[];
  agentId?: string;
  workerUrl?: string;
  protocol?: string;
  /** After `failed` / `refused`: why. */
  error?: string;
  attempts: number;
}

export interface A2aBridges {
  /** The state of every configured agent. */
  status(): BridgeStatus[];
  /** Resolves once every agent has had its first attempt (bridged, failed or refused). */
  readonly firstAttempts: Promise<void>;
  /** Stops retries and drains the bridge workers. */
  close(): Promise<void>;
}

/** The worker name of a bridged agent (a valid worker name: the config name is already `[a-z0-9_-]`). */
export function bridgeWorkerName(agentName: string): string {
  return `a2a-${agentName}`.slice(0, 64);
}

/** Starts bridging; returns at once (fetches run in the background). */
export function startA2aBridges(opts: A2aBridgeOptions): A2aBridges {
  const log: LogFn = opts.log ?? (() => undefined);
  const statuses = new Map<string, BridgeStatus>();
  const workers = new Map<string, RunningWorker>();
  const timers = new Set<NodeJS.Timeout>();
  const abort = new AbortController();
  let closed = false;

  const attempt = async (agent: A2aAgentConfig, delayMs: number): Promise<void> => {
    const status = statuses.get(agent.name)!;
    status.attempts++;
    status.state = 'connecting';
    try {
      const remote = await RemoteA2aAgent.connect(agent.url, {
        name: agent.name,
        signal: abort.signal,
        ...(opts.identity ? { identity: opts.identity } : {}),
        ...(opts.cardTimeoutMs !== undefined ? { timeoutMs: opts.cardTimeoutMs } : {}),
      });
      refuseSelf(remote, opts);
      const tags = bridgeTags(agent.name, remote.skills);
      if (closed) return;
      const running = await startWorker({
        name: bridgeWorkerName(agent.name),
        tags: [...tags.keys()],
        handler: createBridgeHandler(remote, agent.name, tags, agent.url, opts.sendTimeoutMs),
        natsUrl: opts.natsUrl,
        ...meshAccessOf({
          ...(opts.credential ? { credential: opts.credential } : {}),
          ...(opts.join ? { join: opts.join } : {}),
        }),
        ...edgeKeysOf(opts.edgeKeys ?? {}),
        host: '127.0.0.1',
        port: 0,
        mcp: false,
        ...(opts.trustDomain ? { trustDomain: opts.trustDomain } : {}),
        ...(opts.heartbeatSeconds ? { heartbeatSeconds: opts.heartbeatSeconds } : {}),
      });
      if (closed) {
        await running.close(0);
        return;
      }
      workers.set(agent.name, running);
      Object.assign(status, {
        state: 'bridged',
        tags: [...tags.keys()],
        agentId: running.worker.agentId,
        workerUrl: running.url,
        protocol: `${remote.protocolBinding} ${remote.protocolVersion}`,
      });
      delete status.error;
      log('info', 'A2A agent bridged into the mesh', {
        agent: agent.name,
        url: agent.url,
        tags: status.tags,
        protocol: status.protocol,
      });
    } catch (err) {
      if (closed) return;
      const refused = err instanceof AmfError && err.details?.refused === true;
      status.state = refused ? 'refused' : 'failed';
      status.error = (err as Error).message;
      if (refused) {
        log('error', 'A2A agent not bridged', { agent: agent.name, url: agent.url, error: status.error });
        return;
      }
      const next = Math.min(delayMs * 2, opts.maxRetryMs ?? 300_000);
      log('warn', 'A2A agent unreachable; will retry', {
        agent: agent.name,
        url: agent.url,
        error: status.error,
        retry_in_ms: delayMs,
      });
      const timer = setTimeout(() => {
        timers.delete(timer);
        void attempt(agent, next);
      }, delayMs);
      timer.unref();
      timers.add(timer);
    }
  };

  const first: Promise<void>[] = [];
  for (const agent of opts.agents) {
    statuses.set(agent.name, { name: agent.name, url: agent.url, state: 'connecting', attempts: 0 });
    first.push(attempt(agent, opts.retryMs ?? 5000));
  }
  const firstAttempts = Promise.all(first).then(() => undefined);

  return {
    status: () => [...statuses.values()].map((s) => ({ ...s })),
    firstAttempts,
    async close() {
      closed = true;
      abort.abort();
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await firstAttempts.catch(() => undefined);
      await Promise.all([...workers.values()].map((w) => w.close(5000)));
      workers.clear();
    },
  };
}

/** Refuses an agent that is this mesh itself (its card on our origin, or naming our NATS fabric). */
function refuseSelf(remote: RemoteA2aAgent, opts: A2aBridgeOptions): void {
  const origin = (u: string): string | undefined => {
    try {
      return new URL(u).origin;
    } catch {
      return undefined;
    }
  };
  const origins = new Set((opts.selfOrigins ?? []).map(origin));
  const natsUrl = amfCardBlock(remote.card)?.nats_url;
  const urls = [remote.cardUrl, ...remote.card.supportedInterfaces.map((i) => i.url)];
  if (urls.some((u) => origins.has(origin(u))) || (natsUrl !== undefined && natsUrl === opts.natsUrl))
    throw new AmfError(
      'INVALID_REQUEST',
      `A2A agent at ${remote.cardUrl} is this mesh's own coordinator; bridging it would loop every task`,
      { refused: true },
    );
}
