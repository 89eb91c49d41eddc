/**
 * The configs of a local NATS cluster for one mesh: N nats-server nodes, each with its own store
 * dir, routes to every other node, and the same per-role users and ACLs as the single server AMF
 * spawns (rendered by config.ts, so there is one ACL table). Replication, leader election and
 * failover are NATS's own (clustered JetStream, RAFT): AMF only writes the configs.
 * Used by scripts/cluster-config.mjs (scripts/cluster.sh) and by the cluster tests.
 */
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import type { NatsCredentials, RoleCredential } from '../credentials.js';
import { renderNatsConfig } from './config.js';
import { AmfError } from '../../errors.js';

/** One node of a {@link ClusterPlan}. */
export interface ClusterNode {
  /** server_name, unique in the cluster (JetStream's RAFT groups name their members by it). */
  name: string;
  host: string;
  clientPort: number;
  routePort: number;
  /** This node's store dir; JetStream keeps its files in `<storeDir>/jetstream`. */
  storeDir: string;
}

/** A whole cluster. */
export interface ClusterPlan {
  clusterName: string;
  nodes: readonly ClusterNode[];
}

/** Options of {@link planCluster}. */
export interface PlanClusterOptions {
  /** Each node's store dir is `<dir>/<node name>`. */
  dir: string;
  clientPorts: readonly number[];
  routePorts: readonly number[];
  host?: string;
  clusterName?: string;
}

/** Fixed route username; the password is derived (see {@link routePassword}). */
export const ROUTE_USER = 'amf-route';

/** Lays out `clientPorts.length` nodes on one host (one machine; across machines, see docs/cluster.md). */
export function planCluster(opts: PlanClusterOptions): ClusterPlan {
  if (opts.clientPorts.length !== opts.routePorts.length || opts.clientPorts.length < 1) {
    throw new AmfError(
      'CONFIG_INVALID',
      'planCluster: give as many route ports as client ports, at least one of each',
    );
  }
  const host = opts.host ?? '127.0.0.1';
  const nodes = opts.clientPorts.map((clientPort, i) => {
    const name = `amf-n${i + 1}`;
    return {
      name,
      host,
      clientPort,
      routePort: opts.routePorts[i] as number,
      storeDir: join(opts.dir, name),
    };
  });
  return { clusterName: opts.clusterName ?? 'amf', nodes };
}

/**
 * The route password, derived from the coordinator's password: every machine that has the mesh's
 * credentials.json renders the same route secret with nothing more to distribute, and whoever
 * could compute it already holds the coordinator role (full access). Routes need a secret at all
 * because a route connection is trusted as a server: it bypasses every user ACL.
 */
export function routePassword(credentials: NatsCredentials): string {
  return createHmac('sha256', credentials.coordinator.password)
    .update('amf-nats-route-v1')
    .digest('base64url');
}

/**
 * The config text of node `index` of `plan`. With `calloutIssuer` (the public key of the mesh's
 * calloutIssuer.ts key), agents and the join user log in through the coordinators' auth callout;
 * with `systemUser` the coordinators may close revoked agents' connections (revocationKicks.ts).
 */
export function renderClusterNodeConfig(
  plan: ClusterPlan,
  index: number,
  credentials: NatsCredentials,
  options: { calloutIssuer?: string; calloutXkey?: string; systemUser?: RoleCredential } = {},
): string {
  const node = plan.nodes[index];
  if (node === undefined)
    throw new AmfError('INVALID_REQUEST', `no node ${index} in a cluster of ${plan.nodes.length}`);
  return renderNatsConfig({
    host: node.host,
    port: node.clientPort,
    storeDir: node.storeDir,
    credentials,
    serverName: node.name,
    ...(options.calloutIssuer
      ? {
          authCallout: {
            issuer: options.calloutIssuer,
            ...(options.calloutXkey ? { xkey: options.calloutXkey } : {}),
          },
        }
      : {}),
    ...(options.systemUser ? { systemUser: options.systemUser } : {}),
    cluster: {
      name: plan.clusterName,
      host: node.host,
      port: node.routePort,
      routes: plan.nodes
        .filter((n) => n !== node)
        .map((n) => `nats-route://${urlHost(n.host)}:${n.routePort}`),
      routeUser: ROUTE_USER,
      routePassword: routePassword(credentials),
    },
  });
}

/** The comma-separated client URL list that `amf up --nats-url` and workers take. */
export function clusterClientUrls(plan: ClusterPlan): string {
  return plan.nodes.map((n) => `nats://${urlHost(n.host)}:${n.clientPort}`).join(',');
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
