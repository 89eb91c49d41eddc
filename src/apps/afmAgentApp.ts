/**
 * Runs one AFM agent: its HTTP interfaces (webchat, webhook + WebSub, `GET /`, `GET /health`), its
 * console chat when there is a terminal (or it is asked for), and, unless the mesh is off, a mesh
 * worker that serves those same routes on its own HTTP server and answers mesh tasks, A2A and MCP
 * through the agent. Loading the file and building the model runtime happen before (runCommand.ts);
 * this module only assembles, so tests can run it with any responder.
 */
import type { Readable, Writable } from 'node:stream';
import type { Server } from 'node:http';
import { Router, sendJson } from '../http/httpKit.js';
import { serveRouter } from '../edge/worker/workerHttp.js';
import { closeServer, listen } from '../http/httpServer.js';
import { edgeKeysOf, meshAccessOf, startWorker, type RunningWorker } from './workerApp.js';
import type { WorkerEdgeKeys } from '../edge/worker/workerEdgeGate.js';
import type { RoleCredential } from '../fabric/credentials.js';
import type { AgentKey } from '../identity/agentKey.js';
import { isCapabilityTag } from '../events/subjects.js';
import { AmfError } from '../errors.js';
import type { Logger } from '../log.js';
import { VERSION } from '../version.js';
import type { AfmDefinition } from '../afm/types.js';
import type { AgentResponder } from '../afm/interfaces/responder.js';
import {
  createAgentInterfaces,
  type AgentInterfaces,
  type AgentInterfacesOptions,
} from '../afm/interfaces/agentInterfaces.js';
import { createMeshHandler } from '../afm/interfaces/meshHandler.js';
import { runConsoleChat } from '../afm/interfaces/consoleChat.js';
import { loadAfmFile } from '../afm/index.js';
import { createAgentRuntime } from '../afm/runtime/index.js';
import { runtimeResponder } from '../afm/interfaces/runtimeResponder.js';
import { servedMcpSurface } from '../afm/interfaces/servedMcp.js';
import { connectedHubs } from '../afm/runtime/index.js';
import type { McpClientHub } from '../mcpClient/mcpClientHub.js';
import type { HandlerMcpSurface } from '../worker/handlerApi.js';
import { mergeSurfaces, reexportSurface } from '../worker/reexportMcp.js';

export interface RunAgentMeshOptions extends WorkerEdgeKeys {
  natsUrl: string;
  /** How the agent reaches NATS: a join credential and its own key, or a shared role credential. */
  credential?: RoleCredential;
  join?: RoleCredential;
  /** Enrolled by an invite: connects as its own key at once (see StartWorkerOptions.enrolled). */
  enrolled?: boolean;
  key?: AgentKey;
  heartbeatSeconds?: number;
  concurrency?: number;
  mdns?: { interfaceAddress?: string };
}

export interface RunAgentOptions {
  definition: AfmDefinition;
  responder: AgentResponder;
  host?: string;
  /** HTTP port (0 = any free port); default 8766 like a worker. */
  port?: number;
  /** Capability tags; default the file's `x-amf.tags`, else one tag made from the agent name. */
  tags?: string[];
  /** Join the mesh as a worker; absent = interfaces only (`--no-mesh`). */
  mesh?: RunAgentMeshOptions;
  /**
   * Console chat: `true` runs it (stdin need not be a terminal: piped lines are answered one by one),
   * `false` never, `'auto'` (default) when the file has a consolechat interface and stdin is a TTY.
   */
  console?: boolean | 'auto';
  consoleStreams?: { input: Readable; output: Writable; interactive?: boolean };
  log?: Logger;
  websub?: AgentInterfacesOptions['websub'];
  /**
   * The agent's connected `tools.mcp` servers: re-exported on the worker's `/mcp` when the file
   * sets `x-amf.mcp.reexport_servers` (startAfmAgent and `amf run` pass the runtime's).
   */
  mcpServers?: readonly McpClientHub[];
  /** Called once everything but the console runs (to print where the agent serves). */
  onReady?: (agent: RunningAgent) => void;
}

export interface RunningAgent {
  definition: AfmDefinition;
  interfaces: AgentInterfaces;
  /** Base URL of the HTTP server; undefined when nothing is served over HTTP. */
  url: string | undefined;
  tags: string[];
  worker?: RunningWorker;
  /** Resolves when the console chat ends (/exit, Ctrl-D, end of piped input); absent without one. */
  consoleDone?: Promise<void>;
  close(): Promise<void>;
}

/** A worker name from the agent name: `[A-Za-z0-9._-]{1,64}`. */
export function workerNameFor(name: string): string {
  const cleaned = name
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64);
  return cleaned || 'afm-agent';
}

/** The capability tags: explicit, else `x-amf.tags`, else the agent name made into a tag. */
export function meshTagsFor(def: AfmDefinition, explicit: string[] | undefined): string[] {
  const tags = explicit && explicit.length > 0 ? explicit : [...def['x-amf'].tags];
  if (tags.length === 0) {
    const derived = def.name
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 64);
    tags.push(derived || 'afm-agent');
  }
  for (const tag of tags)
    if (!isCapabilityTag(tag))
      throw new AmfError('INVALID_REQUEST', `invalid capability tag "${tag}": expected [a-z0-9-]+`);
  return tags;
}

/**
 * What the agent's worker serves on `/mcp` besides the agent's own tool: the file's `x-amf.mcp`
 * resources and prompts and, when `reexport_servers` is on, its MCP servers; undefined for none.
 */
async function agentMcpSurface(
  def: AfmDefinition,
  servers: readonly McpClientHub[],
  log: Logger | undefined,
): Promise<HandlerMcpSurface | undefined> {
  const parts = [await servedMcpSurface(def)];
  if (def['x-amf'].mcp.reexport_servers)
    for (const hub of servers)
      parts.push(
        await reexportSurface(hub, (server, err) =>
          log?.warn({ server, err: (err as Error).message }, 'MCP server not re-exported'),
        ),
      );
  const present = parts.filter((p): p is HandlerMcpSurface => p !== undefined);
  return present.length > 0 ? mergeSurfaces(...present) : undefined;
}

/** Starts the agent; `close()` stops it in order (WebSub unsubscribe, console, worker drain, server). */
export async function runAgent(opts: RunAgentOptions): Promise<RunningAgent> {
  const def = opts.definition;
  const tags = meshTagsFor(def, opts.tags);
  const ref: { url: string; worker?: RunningWorker } = { url: '' };
  const interfaces = createAgentInterfaces({
    definition: def,
    responder: opts.responder,
    baseUrl: () => ref.url,
    ...(opts.log ? { log: opts.log } : {}),
    ...(opts.websub ? { websub: opts.websub } : {}),
    info: () => ({
      tags,
      mesh: ref.worker ? { agent_id: ref.worker.worker.agentId, visibility: def['x-amf'].visibility } : null,
    }),
  });
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 8766;
  let server: Server | undefined;
  if (opts.mesh) {
    const mcp = await agentMcpSurface(def, opts.mcpServers ?? [], opts.log);
    const log = opts.log;
    ref.worker = await startWorker({
      name: workerNameFor(def.name),
      tags,
      ...(log ? { log: (level, message, fields) => log[level](fields ?? {}, message) } : {}),
      handler: {
        ...createMeshHandler({
          // Also the MCP tool name, which must match [A-Za-z0-9_.-]{1,64}.
          name: workerNameFor(def.name),
          description: def.description,
          responder: opts.responder,
          signature: interfaces.chatSignature,
        }),
        ...(mcp ? { mcp } : {}),
      },
      natsUrl: opts.mesh.natsUrl,
      ...meshAccessOf(opts.mesh),
      ...edgeKeysOf(opts.mesh),
      host,
      port,
      trustDomain: def['x-amf'].trust,
      version: def.version,
      ...(def['x-amf'].tool_alias ? { toolAlias: def['x-amf'].tool_alias } : {}),
      ...(opts.mesh.heartbeatSeconds !== undefined ? { heartbeatSeconds: opts.mesh.heartbeatSeconds } : {}),
      ...(opts.mesh.concurrency !== undefined ? { concurrency: opts.mesh.concurrency } : {}),
      ...(opts.mesh.mdns ? { mdns: opts.mesh.mdns } : {}),
      routes: (router) => interfaces.addRoutes(router),
    });
    ref.url = ref.worker.url;
  } else if (interfaces.hasHttp) {
    const router = new Router().on('GET', '/health', (_req, res) =>
      sendJson(res, 200, { status: 'ok', version: VERSION, agent: def.name }),
    );
    interfaces.addRoutes(router);
    server = serveRouter(router);
    ref.url = await listen(server, host, port);
  }
  interfaces.start();

  let closing: Promise<void> | undefined;
  const consoleStop = new AbortController();
  const running: RunningAgent = {
    definition: def,
    interfaces,
    url: ref.url || undefined,
    tags,
    ...(ref.worker ? { worker: ref.worker } : {}),
    close() {
      closing ??= (async () => {
        consoleStop.abort();
        // Unsubscribe while the server still answers the hub's verification request.
        await interfaces.close();
        await ref.worker?.close();
        if (server) await closeServer(server);
      })();
      return closing;
    },
  };
  // Tell the caller where things are before the console takes the terminal.
  opts.onReady?.(running);
  const hasConsole = def.interfaces.some((i) => i.type === 'consolechat');
  const consoleWanted =
    opts.console === true ||
    ((opts.console ?? 'auto') === 'auto' && hasConsole && process.stdin.isTTY === true);
  if (consoleWanted)
    running.consoleDone = runConsoleChat({
      responder: opts.responder,
      signature: interfaces.chatSignature,
      agentName: def.name,
      signal: consoleStop.signal,
      ...(opts.consoleStreams ?? {}),
    });
  return running;
}

export interface StartAfmAgentOptions extends Omit<RunAgentOptions, 'definition' | 'responder'> {
  /** The `.afm.md` / `.afm` file. */
  file: string;
  /** Where `${secret:}` files are looked up (default `~/.amf`). */
  dataDir?: string;
  /** Refuse plain http:// MCP servers that are not on loopback (`mcp.require_tls`). */
  requireTls?: boolean;
}

/**
 * The AFM agent's composition root for embedders: loads and validates the file, builds its model
 * runtime and tools, and runs its interfaces (and a mesh worker with `mesh`). `close()` stops both.
 * Throws AfmLoadError with every problem of an invalid file.
 */
export async function startAfmAgent(options: StartAfmAgentOptions): Promise<RunningAgent> {
  const { file, dataDir, requireTls, ...rest } = options;
  const definition = await loadAfmFile(file, dataDir !== undefined ? { dataDir } : {});
  const runtime = await createAgentRuntime(definition, {
    ...(rest.log ? { logger: rest.log } : {}),
    ...(requireTls !== undefined ? { requireTls } : {}),
  });
  let agent: RunningAgent;
  try {
    agent = await runAgent({
      ...rest,
      definition,
      responder: runtimeResponder(runtime),
      mcpServers: connectedHubs(runtime.tools),
    });
  } catch (err) {
    await runtime.close();
    throw err;
  }
  return {
    ...agent,
    async close() {
      await agent.close();
      await runtime.close();
    },
  };
}
