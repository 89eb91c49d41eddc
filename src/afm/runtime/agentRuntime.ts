/**
 * The AFM agent runtime: an AFM definition made into something that answers.
 *
 * ```ts
 * const runtime = await createAgentRuntime(def, { env: process.env, logger });
 * const reply = await runtime.respond({
 *   sessionId: 'webchat:alice',   // history is kept per session (bounded)
 *   input: 'What is 2 + 2?',      // checked against signature.input
 *   signature,                    // optional: the calling interface's {input, output} schemas
 *   signal,                       // cancels the model call and running tool calls
 *   onDelta: (t) => process.stdout.write(t), // streamed text (text outputs only)
 * });
 * // reply: { output, text, iterations, stopReason? }  (stopReason 'max_iterations' = stopped early)
 * await runtime.close();          // stops stdio MCP servers, closes HTTP MCP sessions
 * ```
 *
 * - System prompt: `# Role\n<role>\n\n# Instructions\n<instructions>` (the reference runtime's form).
 * - Model: `def.model` resolved with the environment (src/llm), unless `options.model` is given.
 * - Tools: `def.tools.mcp` connected through the MCP client hub (allow/deny filters, names
 *   `<server>__<tool>`), unless `options.tools` is given.
 * - Turns: tool calls until an answer or `def.max_iterations` rounds (then a graceful stop).
 * - Signatures: the signature passed per call, else the first interface's (the "primary" one).
 *   A failed input check rejects with INVALID_REQUEST; a structured output that fails validation
 *   twice rejects with TASK_FAILED; model failures reject with `ModelProviderError`.
 * - History: user messages and final answers only (not tool traffic), at most `maxHistoryMessages`
 *   per session, at most `maxSessions` sessions (least recently used dropped), idle ones expire.
 *   Turns of one session run one after another.
 */
import { AmfError } from '../../errors.js';
import { createChatModel, resolveModelSettings, type AfmModelConfig } from '../../llm/index.js';
import type { ChatMessage, ChatModel, JsonSchema } from '../../llm/types.js';
import type { Logger } from '../../log.js';
import { BoundedCache } from '../../util/boundedCache.js';
import { DEFAULT_MAX_ITERATIONS, type AfmMcpServer } from '../types.js';
import { runAgentTurn, type AgentEvent, type AgentTurnResult } from './agentLoop.js';
import { inputToMessage } from './outputContract.js';
import { connectAfmTools, McpToolProvider, NO_TOOLS, type ToolProvider } from './toolProvider.js';

/** The parts of an AFM definition the runtime reads (`AfmDefinition` satisfies it). */
export interface AgentDefinitionInput {
  readonly name: string;
  readonly role: string;
  readonly instructions: string;
  readonly model?: AfmModelConfig | undefined;
  readonly max_iterations?: number | undefined;
  readonly interfaces?:
    | readonly { readonly signature?: { readonly input?: JsonSchema; readonly output?: JsonSchema } }[]
    | undefined;
  readonly tools?: { readonly mcp: readonly AfmMcpServer[] } | undefined;
}

/** An interface's data contract; absent sides are strings. */
export interface SignatureInput {
  readonly input?: JsonSchema | undefined;
  readonly output?: JsonSchema | undefined;
}

/** Options of `createAgentRuntime`. */
export interface AgentRuntimeOptions {
  /** The model client (tests, or a caller that built one); default from `def.model` and `env`. */
  model?: ChatModel;
  /** The tools; default: `def.tools.mcp` connected through the MCP client hub. */
  tools?: ToolProvider;
  /** Where keys, base URLs and stdio PATH come from (default process.env). */
  env?: NodeJS.ProcessEnv;
  logger?: Logger;
  /** Sessions kept (default 1000). */
  maxSessions?: number;
  /** A session idle this long is forgotten (default 1 hour). */
  sessionIdleMs?: number;
  /** Messages of history kept per session (default 40, i.e. 20 exchanges). */
  maxHistoryMessages?: number;
  /** Refuse plain http:// MCP servers that are not on loopback (`mcp.require_tls`). */
  requireTls?: boolean;
}

/** One request to the agent. */
export interface AgentRequest {
  /** Conversation key (default `default`), at most 256 characters. */
  readonly sessionId?: string;
  /** The input: a string, or a JSON value for a structured `signature.input`. */
  readonly input: unknown;
  /** The calling interface's signature; default: the first interface's. */
  readonly signature?: SignatureInput;
  readonly signal?: AbortSignal;
  readonly onDelta?: (text: string) => void;
  readonly onEvent?: (event: AgentEvent) => void;
}

/** The agent's answer. */
export type AgentReply = AgentTurnResult;

/** A running AFM agent. */
export interface AgentRuntime {
  readonly name: string;
  readonly systemPrompt: string;
  readonly model: ChatModel;
  readonly tools: ToolProvider;
  readonly maxIterations: number;
  /** MCP servers of the definition that could not be used, with the reason (empty when all connected). */
  readonly toolFailures: readonly { readonly server: string; readonly error: string }[];
  respond(request: AgentRequest): Promise<AgentReply>;
  /** Forgets a session's history. */
  endSession(sessionId: string): void;
  /** Closes the tools it connected itself (not injected ones). */
  close(): Promise<void>;
}

const MAX_SESSION_ID_CHARS = 256;
/** Characters of history kept per session, whatever the message count. */
export const MAX_HISTORY_CHARS = 400_000;

/**
 * Keeps the newest exchanges within the message and character budgets; whole exchanges only, so
 * the history always starts with a user message (Anthropic refuses anything else).
 */
export function trimHistory(messages: readonly ChatMessage[], maxMessages: number): ChatMessage[] {
  let start = Math.max(0, messages.length - maxMessages);
  let chars = 0;
  for (let i = messages.length - 1; i >= start; i--) {
    chars += messages[i]!.content.length;
    if (chars > MAX_HISTORY_CHARS) {
      start = i + 1;
      break;
    }
  }
  while (start < messages.length && messages[start]!.role !== 'user') start++;
  return messages.slice(start);
}

/** The system prompt of an AFM agent. */
export function buildSystemPrompt(role: string, instructions: string): string {
  return `# Role\n${role.trim()}\n\n# Instructions\n${instructions.trim()}`;
}

/**
 * Builds the runtime of an AFM agent: resolves its model (throws INVALID_REQUEST for a bad provider,
 * URL or missing key) and connects its MCP servers (servers that fail are logged and skipped).
 */
export async function createAgentRuntime(
  def: AgentDefinitionInput,
  options: AgentRuntimeOptions = {},
): Promise<AgentRuntime> {
  const env = options.env ?? process.env;
  const model = options.model ?? createChatModel(resolveModelSettings(def.model, env));
  const ownTools = options.tools === undefined && (def.tools?.mcp.length ?? 0) > 0;
  const tools =
    options.tools ??
    (ownTools
      ? await connectAfmTools(def.tools!.mcp, {
          env,
          ...(options.logger ? { logger: options.logger } : {}),
          ...(options.requireTls ? { requireTls: true } : {}),
        })
      : NO_TOOLS);
  return new AgentRuntimeImpl(def, model, tools, ownTools, options);
}

class AgentRuntimeImpl implements AgentRuntime {
  readonly name: string;
  readonly systemPrompt: string;
  readonly maxIterations: number;
  readonly toolFailures: readonly { readonly server: string; readonly error: string }[];
  private readonly sessions: BoundedCache<ChatMessage[]>;
  /** The tail of each busy session's turn queue. */
  private readonly running = new Map<string, Promise<unknown>>();
  private readonly maxHistory: number;
  private readonly defaultSignature: SignatureInput | undefined;
  private closed = false;
  private readonly logger: Logger | undefined;

  constructor(
    def: AgentDefinitionInput,
    readonly model: ChatModel,
    readonly tools: ToolProvider,
    private readonly ownsTools: boolean,
    options: AgentRuntimeOptions,
  ) {
    this.name = def.name;
    this.systemPrompt = buildSystemPrompt(def.role, def.instructions);
    this.maxIterations = def.max_iterations ?? DEFAULT_MAX_ITERATIONS;
    this.defaultSignature = def.interfaces?.[0]?.signature;
    this.toolFailures = tools instanceof McpToolProvider ? tools.failures : [];
    this.sessions = new BoundedCache(options.maxSessions ?? 1000, options.sessionIdleMs ?? 3_600_000);
    this.maxHistory = Math.max(0, options.maxHistoryMessages ?? 40);
    this.logger = options.logger;
  }

  respond(request: AgentRequest): Promise<AgentReply> {
    if (this.closed) return Promise.reject(new AmfError('UNAVAILABLE', `agent "${this.name}" is shut down`));
    const sessionId = request.sessionId ?? 'default';
    if (typeof sessionId !== 'string' || sessionId === '' || sessionId.length > MAX_SESSION_ID_CHARS)
      return Promise.reject(
        new AmfError('INVALID_REQUEST', `session id must be 1-${MAX_SESSION_ID_CHARS} characters`),
      );
    // Turns of one session run in order so each sees the previous answer in its history.
    const previous = this.running.get(sessionId) ?? Promise.resolve();
    const turn = previous.catch(() => undefined).then(() => this.turn(sessionId, request));
    this.running.set(sessionId, turn);
    void turn
      .catch(() => undefined)
      .finally(() => {
        if (this.running.get(sessionId) === turn) this.running.delete(sessionId);
      });
    return turn;
  }

  private async turn(sessionId: string, request: AgentRequest): Promise<AgentReply> {
    const signature = request.signature ?? this.defaultSignature;
    const userMessage = inputToMessage(request.input, signature?.input);
    const history = this.sessions.get(sessionId) ?? [];
    const result = await runAgentTurn({
      model: this.model,
      systemPrompt: this.systemPrompt,
      history,
      userMessage,
      tools: this.tools,
      maxIterations: this.maxIterations,
      outputSchema: signature?.output,
      signal: request.signal,
      onDelta: request.onDelta,
      onEvent: (event) => {
        // Names and outcomes only: tool arguments are model output that may carry user data.
        if (event.type === 'tool_call')
          this.logger?.debug(
            { agent: this.name, session: sessionId, tool: event.name, round: event.round },
            'tool call',
          );
        else if (event.type === 'repair')
          this.logger?.info({ agent: this.name, session: sessionId, reason: event.reason }, 'output repair');
        else if (event.type === 'stopped')
          this.logger?.info(
            { agent: this.name, session: sessionId, rounds: event.rounds },
            'max_iterations reached',
          );
        request.onEvent?.(event);
      },
    });
    const next: ChatMessage[] = [
      ...history,
      { role: 'user', content: userMessage },
      { role: 'assistant', content: result.text },
    ];
    this.sessions.set(sessionId, trimHistory(next, this.maxHistory));
    return result;
  }

  endSession(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsTools) await this.tools.close();
  }
}
