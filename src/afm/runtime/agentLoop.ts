/**
 * One agent turn: the model is called with the system prompt, the session history, the new user
 * message and the tools; every tool call it asks for is run and its result fed back, until the
 * model answers without tool calls or `maxIterations` tool-call rounds have run, in which case the
 * turn ends gracefully with an answer that says so. A structured output is then validated, and a
 * failing answer gets exactly one repair call (the validation errors are shown to the model, tools
 * are off) before the turn fails with a clear error.
 *
 * The loop knows nothing of AFM files, sessions or interfaces: it takes a small input of its own
 * (`AgentTurnInput`) so it can be driven and tested alone.
 */
import { AmfError } from '../../errors.js';
import type {
  ChatMessage,
  ChatModel,
  JsonSchema,
  ModelRequest,
  ModelResponse,
  ToolCall,
} from '../../llm/types.js';
import { contractFor, outputText, type OutputContract } from './outputContract.js';
import type { ToolOutcome, ToolProvider } from './toolProvider.js';

/** Most tool calls run in one round; more in one answer is a runaway model, and they get an error result. */
export const MAX_TOOL_CALLS_PER_ROUND = 16;
/** Longest tool result text fed back to the model (the MCP hub already cuts at 50,000 characters). */
export const MAX_TOOL_RESULT_CHARS = 50_000;

/** Something that happened during a turn, for consoles and logs. */
export type AgentEvent =
  | { readonly type: 'tool_call'; readonly round: number; readonly name: string; readonly arguments: string }
  | { readonly type: 'tool_result'; readonly round: number; readonly name: string; readonly isError: boolean }
  | { readonly type: 'repair'; readonly reason: string }
  | { readonly type: 'stopped'; readonly reason: 'max_iterations'; readonly rounds: number };

/** Everything one turn needs. */
export interface AgentTurnInput {
  readonly model: ChatModel;
  readonly systemPrompt: string;
  /** Earlier user/assistant messages of the session (not changed by the loop). */
  readonly history: readonly ChatMessage[];
  readonly userMessage: string;
  readonly tools: ToolProvider;
  /** Tool-call rounds allowed before the turn stops (AFM `max_iterations`). */
  readonly maxIterations: number;
  /** `signature.output`; absent or `type: string` = a text answer. */
  readonly outputSchema?: JsonSchema | undefined;
  readonly signal?: AbortSignal | undefined;
  /** Text fragments as the model streams them (text outputs only: structured ones are validated first). */
  readonly onDelta?: ((text: string) => void) | undefined;
  readonly onEvent?: ((event: AgentEvent) => void) | undefined;
}

/** How a turn ended. */
export interface AgentTurnResult {
  /** The answer in the shape of the output schema (a string for text). */
  readonly output: unknown;
  /**
   * The answer as text: for a text output everything the model said during the turn, joined by
   * blank lines (what was streamed, each piece trimmed); for a structured output its JSON.
   */
  readonly text: string;
  /** Tool-call rounds that ran. */
  readonly iterations: number;
  /** Set when the turn ended without a normal answer; the text then says so. */
  readonly stopReason?: 'max_iterations';
}

/** The note a stopped turn ends with. */
export function maxIterationsNotice(limit: number): string {
  return `[Stopped: this agent reached its limit of ${limit} tool-call round${limit === 1 ? '' : 's'} (max_iterations) before it could finish. Ask again, or raise max_iterations.]`;
}

function parseArguments(
  raw: string,
): { ok: true; args: Record<string, unknown> } | { ok: false; error: string } {
  if (raw.trim() === '') return { ok: true, args: {} };
  try {
    const value: unknown = JSON.parse(raw);
    if (value && typeof value === 'object' && !Array.isArray(value))
      return { ok: true, args: value as Record<string, unknown> };
    return { ok: false, error: 'tool arguments must be a JSON object' };
  } catch (err) {
    return { ok: false, error: `tool arguments are not valid JSON: ${(err as Error).message}` };
  }
}

/** Runs one tool call; failures become error results the model can read, except a cancel. */
async function runToolCall(
  call: ToolCall,
  tools: ToolProvider,
  signal: AbortSignal | undefined,
): Promise<ToolOutcome> {
  const parsed = parseArguments(call.arguments);
  if (!parsed.ok) return { text: parsed.error, isError: true };
  try {
    const res = await tools.callTool(call.name, parsed.args, signal ? { signal } : {});
    const text =
      res.text.length > MAX_TOOL_RESULT_CHARS
        ? `${res.text.slice(0, MAX_TOOL_RESULT_CHARS)}\n[truncated: ${res.text.length} characters]`
        : res.text;
    return { text, isError: res.isError };
  } catch (err) {
    if (signal?.aborted) throw new AmfError('TIMEOUT', `agent turn cancelled while tool "${call.name}" ran`);
    return { text: `tool call failed: ${(err as Error).message}`, isError: true };
  }
}

/** Runs the tool calls of one round in parallel, results in call order. */
async function runRound(
  calls: readonly ToolCall[],
  round: number,
  input: AgentTurnInput,
): Promise<ChatMessage[]> {
  const results = await Promise.all(
    calls.map(async (call, i): Promise<ChatMessage> => {
      input.onEvent?.({ type: 'tool_call', round, name: call.name, arguments: call.arguments });
      const outcome =
        i < MAX_TOOL_CALLS_PER_ROUND
          ? await runToolCall(call, input.tools, input.signal)
          : { text: `not run: at most ${MAX_TOOL_CALLS_PER_ROUND} tool calls per answer`, isError: true };
      input.onEvent?.({ type: 'tool_result', round, name: call.name, isError: outcome.isError });
      return {
        role: 'tool',
        toolCallId: call.id,
        name: call.name,
        content: outcome.text,
        isError: outcome.isError,
      };
    }),
  );
  return results;
}

/** Runs one agent turn. Rejects with AmfError (a ModelProviderError for model failures). */
export async function runAgentTurn(input: AgentTurnInput): Promise<AgentTurnResult> {
  if (!Number.isInteger(input.maxIterations) || input.maxIterations < 0)
    throw new AmfError(
      'INVALID_REQUEST',
      `max_iterations must be a non-negative integer, got ${input.maxIterations}`,
    );
  const contract: OutputContract = contractFor(input.outputSchema);
  const system = contract.instruction
    ? `${input.systemPrompt}\n\n${contract.instruction}`
    : input.systemPrompt;
  const messages: ChatMessage[] = [...input.history, { role: 'user', content: input.userMessage }];
  const toolSpecs = input.tools.listTools();
  const onDelta = contract.structured ? undefined : input.onDelta;
  // Text the model says across the rounds of a text turn ("Let me look that up.", then the answer),
  // joined by blank lines: what was streamed is exactly the answer returned.
  const said: string[] = [];
  const call = (extra: Partial<ModelRequest> = {}, stream = true): Promise<ModelResponse> => {
    let separate = said.length > 0;
    const emit =
      onDelta && stream
        ? (delta: string): void => {
            if (separate) onDelta('\n\n');
            separate = false;
            onDelta(delta);
          }
        : undefined;
    return input.model.complete(
      {
        system,
        messages,
        tools: toolSpecs,
        ...(contract.request ? { structuredOutput: contract.request } : {}),
        ...extra,
      },
      { ...(input.signal ? { signal: input.signal } : {}), ...(emit ? { onDelta: emit } : {}) },
    );
  };
  const remember = (text: string): void => {
    if (text.trim()) said.push(text.trim());
  };

  let rounds = 0;
  let response = await call();
  while (response.toolCalls.length > 0) {
    remember(response.text);
    if (rounds >= input.maxIterations) {
      input.onEvent?.({ type: 'stopped', reason: 'max_iterations', rounds });
      if (contract.structured)
        throw new AmfError(
          'TASK_FAILED',
          `the agent reached max_iterations (${input.maxIterations} tool-call rounds) before producing its structured output`,
        );
      const notice = maxIterationsNotice(input.maxIterations);
      onDelta?.(said.length > 0 ? `\n\n${notice}` : notice);
      const text = [...said, notice].join('\n\n');
      return { output: text, text, iterations: rounds, stopReason: 'max_iterations' };
    }
    rounds++;
    messages.push({ role: 'assistant', content: response.text, toolCalls: response.toolCalls });
    messages.push(...(await runRound(response.toolCalls, rounds, input)));
    response = await call();
  }
  remember(response.text);
  // A structured answer is the last reply alone; a text answer is everything said in the turn.
  const answer = contract.structured ? response.text : said.join('\n\n');

  const first = contract.parse(answer);
  if (first.ok) return { output: first.value, text: outputText(first.value), iterations: rounds };

  // One repair: show the model what was wrong; tools off so it answers instead of exploring again.
  input.onEvent?.({ type: 'repair', reason: first.reason });
  messages.push({ role: 'assistant', content: response.text });
  messages.push({
    role: 'user',
    content: `Your answer could not be accepted: ${first.reason}. Reply again with only the corrected answer${contract.structured ? ' as JSON' : ''}, following the output format exactly.`,
  });
  // Not streamed: the rejected answer already was, and the client is told the outcome by the result.
  const repaired = await call({ toolChoice: 'none' }, false);
  const second = contract.parse(repaired.text);
  if (second.ok) return { output: second.value, text: outputText(second.value), iterations: rounds };
  throw new AmfError(
    'TASK_FAILED',
    `the model's answer does not match the output signature, also after one repair attempt: ${second.reason}`,
    { firstReason: first.reason, secondReason: second.reason },
  );
}
