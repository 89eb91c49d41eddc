/**
 * How the coordinator authenticates itself and its peers on calls it forwards to agents (seed:
 * "MCP call authentication"), as a fetch for the MCP SDK transport of one agent:
 *
 * 1. A bearer (`McpCallCredentials`): a JWT-SVID for the agent under SPIFFE, else the coordinator's
 *    own short-lived token for the agent's id (signed with its key, which the agent learned at join;
 *    apps/workerEdgeGate.ts checks it). Asked for on every request; both are cached for half their life.
 * 2. `https://`: every connection must present the agent's pinned certificate (tlsPins.ts).
 * 3. `http://`: plain fetch; the federation warns `mcp_call_unauthenticated` on every call.
 *
 * Every request also carries `X-AMF-Coordinator-Fingerprint`.
 */
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { COORDINATOR_FINGERPRINT_HEADER } from '../coordinatorFingerprint.js';
import http from 'node:http';
import https from 'node:https';
import { nodeFetch } from './nodeFetch.js';
import { PinnedHttpsAgent, type TlsPinMismatchError } from './tlsPins.js';
import type { AgentKey } from '../../../identity/agentKey.js';
import { issueToken } from '../../../identity/signedToken.js';
import { BoundedCache } from '../../../util/boundedCache.js';

/**
 * Hook for the SPIFFE tier: the headers to add to one request to `agentId` (e.g.
 * `{authorization: 'Bearer <JWT-SVID for audience>'}`); `{}` when it has none to offer.
 */
export interface McpCallCredentials {
  /** Short name of the tier it provides, recorded in the audit (`spiffe`). */
  readonly kind: string;
  headersFor(agentId: string, audience: string): Promise<Record<string, string>>;
}

/** No bearer on any call (a federation built without a key, e.g. in tests). */
export const NO_CALL_CREDENTIALS: McpCallCredentials = Object.freeze({
  kind: 'none',
  headersFor: () => Promise.resolve({}),
});

/** Lifetime of a coordinator bearer; a new one is minted once half of it has passed. */
const COORDINATOR_BEARER_TTL_SECONDS = 300;

/**
 * The coordinator's own bearer on every call: a token signed with its key (identity/signedToken.ts)
 * for the agent's id, valid for 5 minutes and reused until half of that has passed, so a call costs
 * an Ed25519 signature only every 2.5 minutes per agent.
 */
export function coordinatorCallCredentials(key: AgentKey): McpCallCredentials {
  const halfLifeMs = (COORDINATOR_BEARER_TTL_SECONDS * 1000) / 2;
  const tokens = new BoundedCache<string>(4096, halfLifeMs);
  return {
    kind: 'coordinator',
    headersFor: (agentId) => {
      let token = tokens.get(agentId);
      if (token === undefined) {
        token = issueToken(key, {
          audience: agentId,
          ttlSeconds: COORDINATOR_BEARER_TTL_SECONDS,
          subject: 'amf:coordinator',
        });
        tokens.set(agentId, token);
      }
      return Promise.resolve({ authorization: `Bearer ${token}` });
    },
  };
}

/** True when `endpoint` is an `https://` URL (the TOFU tier). */
export function isHttps(endpoint: string): boolean {
  return endpoint.toLowerCase().startsWith('https://');
}

/** What one agent's fetch needs. */
export interface AgentFetchOptions {
  agentId: string;
  /** The agent's MCP endpoint (the audience of a bearer). */
  endpoint: string;
  credentials: McpCallCredentials;
  coordinatorFingerprint?: string;
  /** SHA-256 fingerprint every TLS connection must present (https endpoints). */
  pin?: string;
  onPinMismatch?: (err: TlsPinMismatchError) => void;
}

/** An HTTP answer whose body is read as it arrives. */
export interface RawAnswer {
  status: number;
  contentType: string;
  /** The body's chunks; an SSE answer's events can be acted on before it ends. */
  body: AsyncIterable<Uint8Array>;
}

/** A fetch for one agent and the resources to release when the agent leaves. */
export interface AgentFetch {
  fetch: FetchLike;
  /**
   * POSTs `body` to the agent over the same connections, pin and headers as `fetch`: the direct
   * `tools/call` path (directToolCall.ts) needs no web Request/Response. The caller reads the body
   * (and bounds what it keeps); `signal` aborts it.
   */
  post(url: string, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<RawAnswer>;
  close(): void;
}

/** Builds the fetch the federation's SDK client uses for one agent. */
export function createAgentFetch(options: AgentFetchOptions): AgentFetch {
  // Pinned https: every connection checked against the pin. Plain http: a keep-alive pool of our
  // own. https without a pin (no pin store configured): global fetch, verified against the CAs.
  const agent = options.pin
    ? new PinnedHttpsAgent(options.agentId, options.pin, options.onPinMismatch ?? (() => undefined))
    : isHttps(options.endpoint)
      ? undefined
      : new http.Agent({ keepAlive: true, maxSockets: 64 });
  const base: FetchLike = agent ? nodeFetch(agent) : (input, init) => fetch(input, init);
  const ownHeaders = async (): Promise<Record<string, string>> => ({
    ...(options.coordinatorFingerprint
      ? { [COORDINATOR_FINGERPRINT_HEADER]: options.coordinatorFingerprint }
      : {}),
    ...(await options.credentials.headersFor(options.agentId, options.endpoint)),
  });
  return {
    async fetch(input, init) {
      const headers = new Headers(init?.headers);
      for (const [name, value] of Object.entries(await ownHeaders())) headers.set(name, value);
      return base(input, { ...init, headers });
    },
    async post(url, headers, body, signal) {
      const all = { ...headers, ...(await ownHeaders()) };
      if (agent) return rawPost(agent, url, all, body, signal);
      const res = await fetch(url, { method: 'POST', headers: all, body, signal });
      return {
        status: res.status,
        contentType: res.headers.get('content-type') ?? '',
        body: res.body ?? emptyBody(),
      };
    },
    close() {
      agent?.destroy();
    },
  };
}

async function* emptyBody(): AsyncGenerator<Uint8Array> {}

/** One POST through `agent` (http.Agent, or the pinned https.Agent); resolves once headers arrive. */
function rawPost(
  agent: http.Agent,
  url: string,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const options: http.RequestOptions = {
      method: 'POST',
      agent,
      signal,
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
    };
    const req = agent instanceof https.Agent ? https.request(url, options) : http.request(url, options);
    req.once('error', reject);
    req.once('response', (res) =>
      resolve({
        status: res.statusCode ?? 502,
        contentType: String(res.headers['content-type'] ?? ''),
        body: res,
      }),
    );
    req.end(body);
  });
}
