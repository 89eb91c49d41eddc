/**
 * The Fabric operations: `fabric.call` runs a task on the mesh through the coordinator's task service
 * (with the call's trace id as the task's `amftraceid`, so it follows the task across delegations),
 * and `fabric.tool.<category>.<name>` calls a federated MCP tool through the federation, which makes
 * the OPA decision and writes the audit record (category = the agent's tool prefix, name = the tool).
 * `fabric.agent.list`, `fabric.tool.list` and `fabric.health` are the reference node's read-only
 * helpers. Everything returns the `result` of the envelope or throws a FabricError.
 */
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { RegisteredAgent } from '../../registry/agentRegistry.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import type { TaskService, TaskUpdate } from '../../coordinator/tasks/taskService.js';
import { bodyValidator } from '../../http/bodyValidator.js';
import { namesAgent } from '../../registry/intentRouter.js';
import { FABRIC_CALL_ARGUMENTS_SCHEMA, type FabricCallArguments } from './fabricCallSchema.js';
import { FabricError } from './fabricErrors.js';
import type { FabricTrace } from './fabricTrace.js';

const TOOL_PREFIX = 'fabric.tool.';
const WIRE_SEPARATOR = '__';
const MAX_CONTEXT_BYTES = 64 * 1024;

/** One tool of the federated MCP catalog. */
export interface FabricTool {
  /** Name on the MCP wire (`<prefix>__<tool>`). */
  wireName: string;
  agentId: string;
  /** The tool's name at the agent. */
  tool: string;
  definition: Tool;
}

/**
 * The federated MCP catalog as Fabric uses it: the coordinator runtime's federation (protocols/mcp),
 * handed in by the composition root, as adapters import no other adapter.
 */
export interface FabricToolCatalog {
  /** The tools of the live agents, by wire name. */
  catalog(): ReadonlyMap<string, FabricTool>;
  /** Calls a tool through the federation, which makes the OPA decision and writes the audit record. */
  call(
    wireName: string,
    args: Record<string, unknown>,
    who: { caller: string; sessionId: null },
    signal?: AbortSignal,
  ): Promise<CallToolResult>;
}

/** What the Fabric operations need: the mesh's tasks and agents, and the federated tools. */
export interface FabricDeps {
  tasks: Pick<TaskService, 'submit'>;
  agents: AgentDirectory;
  federation: FabricToolCatalog;
  /** Default (and upper bound) of `fabric.call`'s wait when `timeout_ms` is not given. */
  requestTimeoutMs: number;
  maxTaskBytes: number;
  /** Told of each call for a capability no live agent offers (the console shows these refusals). */
  onUnknownCapability?: (capability: string, message: string) => void;
}

/** One call's context. */
export interface FabricCallContext {
  trace: FabricTrace;
  /** Who calls (the client address; the MCP policy sees it as the caller). */
  caller: string;
  signal: AbortSignal;
  stream: boolean;
  /** Streamed calls receive status, token and progress events here. */
  onEvent?: (event: 'status' | 'token' | 'progress', data: Record<string, unknown>) => void;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const checkCallArguments = bodyValidator<FabricCallArguments>(FABRIC_CALL_ARGUMENTS_SCHEMA, {
  prefix: 'arguments',
  root: 'arguments',
});

function findAgent(registry: AgentDirectory, id: string): RegisteredAgent | undefined {
  return registry.get(id) ?? registry.list().find((a) => namesAgent(a, id));
}

/** `fabric.call {agent_id, capability, task, context?, timeout_ms?}`. */
async function callAgent(
  args: Record<string, unknown>,
  deps: FabricDeps,
  ctx: FabricCallContext,
): Promise<unknown> {
  const checked = checkCallArguments(args);
  if (!checked.ok) throw new FabricError('BAD_INPUT', checked.problem.message);
  const { agent_id: agentId, capability, task, context } = checked.value;
  if (Buffer.byteLength(task) > deps.maxTaskBytes)
    throw new FabricError('BAD_INPUT', `arguments.task is larger than ${deps.maxTaskBytes} bytes`);
  // The context travels in the announcement on NATS, whose messages are bounded.
  if (context && Buffer.byteLength(JSON.stringify(context)) > MAX_CONTEXT_BYTES)
    throw new FabricError('BAD_INPUT', `arguments.context is larger than ${MAX_CONTEXT_BYTES} bytes`);
  const timeoutMs = checked.value.timeout_ms ?? deps.requestTimeoutMs;
  // "*" asks for any agent with the capability; mesh dispatch is by capability either way, so a named
  // agent is checked here and the answering agent is reported in result.agent_id.
  if (agentId !== '*') {
    const agent = findAgent(deps.agents, agentId);
    if (!agent) throw new FabricError('AGENT_NOT_FOUND', `no agent "${agentId}" is registered in this mesh`);
    if (agent.status !== 'live' || agent.record.status === 'draining' || agent.record.status === 'offline')
      throw new FabricError(
        'AGENT_OFFLINE',
        `agent "${agentId}" is ${agent.status === 'live' ? 'draining' : agent.status}`,
      );
    if (deps.agents.isDisabled(agent.record.agent_id))
      throw new FabricError('AGENT_OFFLINE', `agent "${agentId}" is disabled by the operator`);
    if (!(agent.record.capability_tags ?? []).includes(capability))
      throw new FabricError(
        'CAPABILITY_NOT_FOUND',
        `agent "${agentId}" does not offer capability "${capability}" (it offers ${(agent.record.capability_tags ?? []).join(', ') || 'none'})`,
      );
  } else if (!deps.agents.servesTag(capability)) {
    const message = `no live agent offers capability "${capability}"`;
    deps.onUnknownCapability?.(capability, message);
    throw new FabricError('CAPABILITY_NOT_FOUND', message);
  }
  const onUpdate = (u: TaskUpdate) => {
    if (u.kind === 'partial') ctx.onEvent?.('token', { delta: u.delta, seq: u.seq });
    else if (u.kind === 'progress')
      ctx.onEvent?.('progress', { agent_id: u.agentId, message: u.message ?? '' });
    else if (u.kind === 'claimed') ctx.onEvent?.('status', { state: 'working', agent_id: u.agentId });
    else ctx.onEvent?.('status', { state: 'input-required', reason: u.reason });
  };
  const result = await deps.tasks.submit({
    tag: capability,
    task,
    timeoutMs,
    signal: ctx.signal,
    traceId: ctx.trace.trace_id,
    stream: ctx.stream,
    input: {
      fabric: {
        agent_id: agentId,
        span_id: ctx.trace.span_id,
        parent_span_id: ctx.trace.parent_span_id,
        ...(context ? { context } : {}),
      },
    },
    onAnnounced: (taskId) => ctx.onEvent?.('status', { state: 'submitted', task_id: taskId }),
    onUpdate,
  });
  return {
    answer: result.text,
    data: result.data ?? null,
    artifacts: [],
    citations: [],
    agent_id: result.agentId,
    capability,
    task_id: result.taskId,
    confidence: Number.isFinite(result.confidence) ? result.confidence : null,
  };
}

/** The federated wire name a `fabric.tool.<category>.<name>` call means, if the catalog has it. */
export function resolveToolName(name: string, federation: FabricToolCatalog): string | undefined {
  const rest = name.slice(TOOL_PREFIX.length);
  const catalog = federation.catalog();
  if (rest.includes(WIRE_SEPARATOR) && catalog.has(rest)) return rest;
  // Aliases may contain dots, so every split point is tried, shortest category first.
  for (let i = rest.indexOf('.'); i > 0; i = rest.indexOf('.', i + 1)) {
    const wire = `${rest.slice(0, i)}${WIRE_SEPARATOR}${rest.slice(i + 1)}`;
    if (catalog.has(wire)) return wire;
  }
  return undefined;
}

/** `fabric.tool.<category>.<name>`: the arguments go to the tool as they are (minus a trace object). */
async function callTool(
  name: string,
  args: Record<string, unknown>,
  deps: FabricDeps,
  ctx: FabricCallContext,
): Promise<unknown> {
  const wire = resolveToolName(name, deps.federation);
  if (!wire)
    throw new FabricError(
      'BAD_INPUT',
      `Unknown tool: ${name.slice(0, 200)} (expected fabric.tool.<agent prefix>.<tool>; see fabric.tool.list)`,
      404,
    );
  const { trace: _trace, stream: _stream, ...toolArgs } = args;
  void _trace;
  void _stream;
  const entry = deps.federation.catalog().get(wire)!;
  ctx.onEvent?.('status', { state: 'working', tool: `${entry.agentId}/${entry.tool}` });
  const result = await deps.federation.call(
    wire,
    toolArgs,
    { caller: ctx.caller, sessionId: null },
    ctx.signal,
  );
  const text = (result.content ?? [])
    .map((c) => (c.type === 'text' && typeof c.text === 'string' ? c.text : ''))
    .join('');
  if (result.isError) {
    const policy =
      (result._meta?.['amf/policy'] as { decision?: string; reasons?: string[] } | undefined) ?? undefined;
    if (policy?.decision === 'deny')
      throw new FabricError('AUTH_DENIED', text || 'the AMF policy denied this call');
    throw new FabricError('UPSTREAM_ERROR', text.slice(0, 2000) || 'the tool reported an error');
  }
  return {
    tool: `${entry.agentId}/${entry.tool}`,
    agent_id: entry.agentId,
    text,
    content: result.content,
    ...(result.structuredContent ? { structured: result.structuredContent } : {}),
  };
}

function listAgents(args: Record<string, unknown>, deps: FabricDeps): unknown {
  const filter = isObject(args.filter) ? args.filter : {};
  const capability = typeof filter.capability === 'string' ? filter.capability : undefined;
  const status = typeof filter.status === 'string' ? filter.status : undefined;
  const agents = deps.agents
    .list()
    .filter((a) => !capability || (a.record.capability_tags ?? []).includes(capability))
    .filter((a) => !status || (a.status === 'live' ? 'online' : 'offline') === status)
    .slice(0, 1000)
    .map((a) => ({
      agent_id: a.record.agent_id,
      name: a.record.display_name ?? a.record.agent_id.split('/').pop(),
      capabilities: a.record.capability_tags ?? [],
      status: a.status === 'live' ? 'online' : 'offline',
      endpoint: a.record.endpoint,
    }));
  return { agents };
}

function listTools(args: Record<string, unknown>, deps: FabricDeps): unknown {
  const category = typeof args.category === 'string' ? args.category : undefined;
  const tools = [...deps.federation.catalog().values()]
    .map((t) => {
      const i = t.wireName.indexOf(WIRE_SEPARATOR);
      const prefix = t.wireName.slice(0, i);
      return {
        name: `${TOOL_PREFIX}${prefix}.${t.wireName.slice(i + WIRE_SEPARATOR.length)}`,
        category: prefix,
        agent_id: t.agentId,
        description: t.definition.description ?? '',
        input_schema: t.definition.inputSchema,
        read_only: t.definition.annotations?.readOnlyHint === true,
      };
    })
    .filter((t) => !category || t.category === category);
  return { tools };
}

/** Runs one Fabric operation; the returned value is the envelope's `result`. */
export async function runFabricOperation(
  name: string,
  args: Record<string, unknown>,
  deps: FabricDeps,
  ctx: FabricCallContext,
): Promise<unknown> {
  if (name === 'fabric.call') return callAgent(args, deps, ctx);
  if (name.startsWith(TOOL_PREFIX) && name !== 'fabric.tool.list') return callTool(name, args, deps, ctx);
  if (name === 'fabric.tool.list') return listTools(args, deps);
  if (name === 'fabric.agent.list') return listAgents(args, deps);
  if (name === 'fabric.health') return { status: 'ok', version: 'af-mcp-0.1' };
  throw new FabricError(
    'BAD_INPUT',
    `Unknown tool: ${name.slice(0, 200)} (expected fabric.call, fabric.tool.<category>.<name>, fabric.tool.list, fabric.agent.list or fabric.health)`,
  );
}
