/**
 * How the coordinator authenticates itself and its peers on calls it forwards to agents (seed:
 * "MCP call authentication"), as a fetch for the MCP SDK transport of one agent:
 *
 * 1. SPIFFE bearer: `McpCallCredentials` is the hook the identity work fills (a JWT-SVID as
 *    `Authorization: Bearer`, asked for on every request because SVIDs expire). Not built yet: the
 *    provider in use is `NO_CALL_CREDENTIALS`, which adds nothing.
 * 2. `https://`: every connection must present the agent's pinned certificate (tlsPins.ts).
 * 3. `http://`: plain fetch; the federation warns `mcp_call_unauthenticated` on every call.
 *
 * Every request also carries `X-AMF-Coordinator-Fingerprint`.
 */
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { COORDINATOR_FINGERPRINT_HEADER } from './coordinatorFingerprint.js';
import http from 'node:http';
import { nodeFetch } from './nodeFetch.js';
import { PinnedHttpsAgent, type TlsPinMismatchError } from './tlsPins.js';

/**
 * Hook for the SPIFFE tier: the headers to add to one request to `agentId` (e.g.
 * `{authorization: 'Bearer <JWT-SVID for audience>'}`); `{}` when it has none to offer.
 */
export interface McpCallCredentials {
  /** Short name of the tier it provides, recorded in the audit (`spiffe`). */
  readonly kind: string;
  headersFor(agentId: string, audience: string): Promise<Record<string, string>>;
}

/** The provider in use until SPIFFE identity is built: no bearer on any call. */
export const NO_CALL_CREDENTIALS: McpCallCredentials = Object.freeze({
  kind: 'none',
  headersFor: () => Promise.resolve({}),
});

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

/** A fetch for one agent and the resources to release when the agent leaves. */
export interface AgentFetch {
  fetch: FetchLike;
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
  return {
    async fetch(input, init) {
      const headers = new Headers(init?.headers);
      if (options.coordinatorFingerprint)
        headers.set(COORDINATOR_FINGERPRINT_HEADER, options.coordinatorFingerprint);
      const extra = await options.credentials.headersFor(options.agentId, options.endpoint);
      for (const [name, value] of Object.entries(extra)) headers.set(name, value);
      return base(input, { ...init, headers });
    },
    close() {
      agent?.destroy();
    },
  };
}
