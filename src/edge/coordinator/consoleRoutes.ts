/**
 * The coordinator endpoints the console needs beyond the DESIGN.md contract (listed in
 * docs/console.md): event history replayed from JetStream, the task list, admission decisions, the
 * federated tool catalog, one agent in full, approving a pending agent, disabling and enabling an
 * agent, and forgetting an agent. All sit behind the operator key like every other non-public route
 * (the coordinator's edge checks it before routing), and every query is bounded.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JetStreamManager } from '@nats-io/jetstream';
import { AmfError } from '../../errors.js';
import type { TaskService } from '../../coordinator/tasks/taskService.js';
import { EVENTS_STREAM } from '../../fabric/jetstream.js';
import type { LogFn } from '../../log.js';
import { parseHistoryQuery, readHistory } from '../../http/eventHistory.js';
import { bodyValidator, validBody } from '../../http/bodyValidator.js';
import { decodePathSegment, readBody, sendJson, type Router } from '../../http/httpKit.js';
import type { McpFederation } from '../../protocols/mcp/federation/federation.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import type { RegisteredAgent } from '../../registry/agentRegistry.js';
import { agentIdForName, type AgentNameSource } from '../../registry/agentNames.js';
import type { Enrollment } from '../../registry/enrollments.js';
import type { Disablement } from '../../registry/disablements.js';
import { ADMISSIONS_MAX_LIMIT, recentAdmissions } from './admissionLog.js';
import { taskSnapshot } from '../../coordinator/sharedState.js';
import { listTasks, parseTaskListQuery } from './taskList.js';
import { APPROVE_BODY_SCHEMA, type ApproveBody } from '../routeBodySchemas.js';

const AGENT_PREFIX = '/agents/';
const APPROVE_SUFFIX = '/approve';
const DISABLE_SUFFIX = '/disable';
const ENABLE_SUFFIX = '/enable';
const MAX_AGENT_ID_CHARS = 512;
const MAX_APPROVE_BODY_BYTES = 4096;
const checkApproveBody = bodyValidator<ApproveBody>(APPROVE_BODY_SCHEMA);

/** What the operator does to agents from the console; the coordinator, which owns the registry, does it. */
export interface AgentOperator {
  /** Approves a pending agent (Coordinator.approveAgent). */
  approve(
    agentId: string,
    expectedNkey?: string,
  ): Promise<{ agent: RegisteredAgent; enrollment?: Enrollment }>;
  /** Takes an agent out of service (Coordinator.disableAgent). */
  disable(agentId: string, from?: string): Promise<{ disablement: Disablement; changed: boolean }>;
  /** Puts a disabled agent back (Coordinator.enableAgent); false when it was not disabled. */
  enable(agentId: string, from?: string): Promise<boolean>;
  /** Removes an agent from the registry and the shared store, with its key binding and enrollment. */
  forget(agentId: string): Promise<void>;
}

/** What the console routes need: the mesh's tasks and agents, the operator's actions, the fabric's streams. */
export interface ConsoleRouteDeps {
  tasks: Pick<TaskService, 'get'>;
  agents: AgentDirectory;
  operator: AgentOperator;
  federation: McpFederation;
  /** Reads the event history and the task and admission records from JetStream. */
  jsm: JetStreamManager;
  log: LogFn;
}

function boundedInt(raw: string | null, fallback: number, max: number, name: string): number {
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new AmfError('INVALID_REQUEST', `${name} must be an integer from 1 to ${max}`);
  return n;
}

/** The agent a `/agents/<id>` path names: a full id, or a short name that one agent has (agentNames.ts). */
function agentIdFrom(url: URL, registry: AgentNameSource, suffix = ''): string {
  const id = decodePathSegment(url.pathname.slice(AGENT_PREFIX.length, url.pathname.length - suffix.length));
  if (id.length === 0 || id.length > MAX_AGENT_ID_CHARS)
    throw new AmfError('INVALID_REQUEST', `agent id must be 1 to ${MAX_AGENT_ID_CHARS} characters`);
  return agentIdForName(registry, id);
}

/** One agent as the console shows it: the advertisement, its state, its card and its tools. */
function agentDetail(
  agent: RegisteredAgent,
  federation: McpFederation,
  enrollment: Enrollment | undefined,
  disablement: Disablement | undefined,
): Record<string, unknown> {
  const id = agent.record.agent_id;
  const tools = [...federation.catalog().values()]
    .filter((t) => t.agentId === id)
    .map((t) => ({ wire_name: t.wireName, tool: t.tool, description: t.definition.description ?? '' }));
  return {
    ...agent.record,
    capability_tags: agent.record.capability_tags ?? [],
    status: agent.status,
    ...(agent.unverified ? { unverified: agent.unverified } : {}),
    ...(agent.heardFrom ? { heard_from: agent.heardFrom } : {}),
    ...(agent.approval ? { approval: agent.approval } : {}),
    ...(enrollment ? { enrollment } : {}),
    ...(disablement ? { status: 'disabled', liveness: agent.status, disabled: disablement } : {}),
    admitted_at: agent.admittedAt,
    last_seen: new Date(agent.lastSeen).toISOString(),
    heartbeat_seconds: agent.heartbeatSeconds,
    card: agent.card ?? null,
    tools,
  };
}

/**
 * `POST /agents/<id>/disable` and `/enable`: the operator takes an agent out of service or puts it
 * back (registry/disablements.ts). No body is read. Answers the agent's state after the change and
 * whether anything changed (disabling a disabled agent keeps the first record).
 */
async function switchAgent(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  deps: ConsoleRouteDeps,
): Promise<void> {
  req.resume();
  const disable = url.pathname.endsWith(DISABLE_SUFFIX);
  const id = agentIdFrom(url, deps.agents, disable ? DISABLE_SUFFIX : ENABLE_SUFFIX);
  const from = req.socket.remoteAddress;
  if (disable) {
    const { disablement, changed } = await deps.operator.disable(id, from);
    sendJson(res, 200, { agent_id: id, status: 'disabled', changed, disabled: disablement });
    return;
  }
  const changed = await deps.operator.enable(id, from);
  sendJson(res, 200, { agent_id: id, status: deps.agents.get(id)?.status ?? 'unlisted', changed });
}

/** Registers the console endpoints on the coordinator's router. */
export function registerConsoleRoutes(router: Router, deps: ConsoleRouteDeps): void {
  const { jsm, federation, agents } = deps;
  router.on('GET', '/events/history', async (_req, res, url) => {
    sendJson(res, 200, await readHistory(jsm, EVENTS_STREAM, parseHistoryQuery(url)));
  });
  router.on('GET', '/tasks', async (_req, res, url) => {
    const query = parseTaskListQuery(url);
    const fresher = (id: string) => {
      const task = deps.tasks.get(id);
      return task ? taskSnapshot(task) : undefined;
    };
    sendJson(res, 200, await listTasks(jsm, query, fresher));
  });
  router.on('GET', '/admissions', async (_req, res, url) => {
    const limit = boundedInt(url.searchParams.get('limit'), 100, ADMISSIONS_MAX_LIMIT, 'limit');
    sendJson(res, 200, { decisions: await recentAdmissions(jsm, agents, limit) });
  });
  router.on('GET', '/tools', (_req, res) => {
    const tools = [...federation.catalog().values()].map((t) => ({
      wire_name: t.wireName,
      agent_id: t.agentId,
      tool: t.tool,
      description: t.definition.description ?? '',
      input_schema: t.definition.inputSchema,
    }));
    // The resources, resource templates and prompts `/mcp` federates, each with the agent behind it.
    const { resources, prompts } = federation.extras();
    sendJson(res, 200, {
      tools,
      resources: resources.list().map((r) => ({
        uri: r.uri,
        name: r.name,
        agent_id: resources.resolve(r.uri)?.agentId ?? '',
        description: r.description ?? '',
        ...(r.mimeType ? { mime_type: r.mimeType } : {}),
      })),
      resource_templates: resources.templates().map((r) => ({
        uri_template: r.uriTemplate,
        name: r.name,
        agent_id: resources.resolveTemplate(r.uriTemplate)?.agentId ?? '',
        description: r.description ?? '',
      })),
      prompts: prompts.list().map((p) => ({
        name: p.name,
        agent_id: prompts.resolve(p.name)?.agentId ?? '',
        description: p.description ?? '',
        arguments: p.arguments ?? [],
      })),
    });
  });
  router.onPrefix('GET', AGENT_PREFIX, (_req, res, url) => {
    const id = agentIdFrom(url, agents);
    const agent = agents.get(id);
    if (!agent) throw new AmfError('NOT_FOUND', `no agent ${id} is known to this coordinator`);
    const nkey = agent.record.nkey;
    sendJson(
      res,
      200,
      agentDetail(agent, federation, nkey ? agents.enrollment(nkey) : undefined, agents.disablement(id)),
    );
  });
  // Approving a pending agent (heard on mDNS only): its key is enrolled and gets its NATS user, or a
  // keyless agent becomes live tied to the address it was heard from. An optional body
  // `{"nkey": "U…"}` names the key the operator saw (`""` for none): a listing that names another
  // key by now is refused rather than approved.
  router.onPrefix('POST', AGENT_PREFIX, async (req, res, url) => {
    if (url.pathname.endsWith(DISABLE_SUFFIX) || url.pathname.endsWith(ENABLE_SUFFIX))
      return switchAgent(req, res, url, deps);
    if (!url.pathname.endsWith(APPROVE_SUFFIX))
      throw new AmfError(
        'NOT_FOUND',
        `no route POST ${url.pathname.slice(0, 200)} (expected /agents/<id>/approve, /disable or /enable)`,
      );
    const id = agentIdFrom(url, agents, APPROVE_SUFFIX);
    const body = await readBody(req, MAX_APPROVE_BODY_BYTES);
    let expected: string | undefined;
    if (body.length > 0) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        throw new AmfError('INVALID_REQUEST', 'the body must be JSON: {"nkey": "U…"} or nothing');
      }
      expected = validBody(checkApproveBody, parsed).nkey;
    }
    const { agent, enrollment } = await deps.operator.approve(id, expected);
    sendJson(res, 200, {
      approved: id,
      status: agent.status,
      ...(enrollment ? { enrollment } : {}),
    });
  });
  // Forgetting removes an agent, live or not, from the registry and the shared store, unbinds its id
  // from its key and drops the key's enrollment (the key rotation path, and how the operator throws
  // out an impostor): a live one loses its NATS user and is disconnected. An agent that holds the
  // data dir's join credential can come back at its next heartbeat, bound to whatever key it shows.
  router.onPrefix('DELETE', AGENT_PREFIX, async (_req, res, url) => {
    const id = agentIdFrom(url, agents);
    const agent = agents.get(id);
    // An id no longer listed may still be bound to its key (removed after a denied re-advertisement).
    if (!agent && agents.boundKey(id) === undefined)
      throw new AmfError('NOT_FOUND', `no agent ${id} is known to this coordinator`);
    const was = agent?.status ?? 'unlisted';
    await deps.operator.forget(id);
    deps.log('info', 'agent forgotten by the operator', { agent_id: id, was });
    sendJson(res, 200, { forgotten: id, was });
  });
}
