/**
 * The AFM agent as a mesh worker handler: mesh tasks (`amf/<tag>` chat completions, A2A messages,
 * direct `/tasks/send`) and MCP tool calls run through the agent's responder. The chat signature is
 * the contract: its input schema becomes the MCP tool's arguments (wrapped as `{input}` when it is not
 * an object), and a structured output travels as the result's `data` with its JSON as the text.
 */
import type { HandlerResult, TaskContext, WorkerHandler } from '../../worker/handlerApi.js';
import { HandlerError } from '../../worker/handlerApi.js';
import { AmfError } from '../../errors.js';
import type { ChatMessage } from '../../events/payloads.js';
import type { AgentResponder, ConversationTurn, RespondResult } from './responder.js';
import { toolInputSchema, type CompiledSignature } from './signature.js';

export interface MeshHandlerOptions {
  name: string;
  description: string;
  responder: AgentResponder;
  signature: CompiledSignature;
}

/** The task input in the shape of the signature; HandlerError `invalid_input` when it does not fit. */
export function taskInput(ctx: Pick<TaskContext, 'text' | 'input'>, sig: CompiledSignature): unknown {
  let value: unknown;
  if (sig.stringInput) value = ctx.text;
  else if (ctx.input !== undefined)
    value = sig.input.type === 'object' ? ctx.input : (ctx.input as { input?: unknown }).input;
  else {
    try {
      value = JSON.parse(ctx.text);
    } catch {
      throw new HandlerError(
        'invalid_input',
        'this agent takes structured input: send its signature input as JSON',
      );
    }
  }
  try {
    sig.checkInput(value);
  } catch (err) {
    throw new HandlerError('invalid_input', err instanceof AmfError ? err.message : String(err));
  }
  return value;
}

/** Earlier user/assistant turns of a chat request (everything before the last user message). */
function historyOf(messages: readonly ChatMessage[]): ConversationTurn[] {
  const turns = messages.filter(
    (m): m is ChatMessage & { role: 'user' | 'assistant' } => m.role === 'user' || m.role === 'assistant',
  );
  return turns.slice(0, -1).map((m) => ({ role: m.role, content: m.content }));
}

function toResult(result: RespondResult): HandlerResult {
  const data =
    typeof result.output === 'object' && result.output !== null && !Array.isArray(result.output)
      ? (result.output as Record<string, unknown>)
      : undefined;
  return { text: result.text, ...(data ? { data } : {}) };
}

/** A small single-consumer queue that turns `onDelta` callbacks into an async iterable. */
async function* streamed(
  run: (onDelta: (text: string) => void) => Promise<RespondResult>,
): AsyncGenerator<string, HandlerResult> {
  const pending: string[] = [];
  let wake: (() => void) | undefined;
  let finished = false;
  const done = run((text) => {
    pending.push(text);
    wake?.();
  }).finally(() => {
    finished = true;
    wake?.();
  });
  done.catch(() => undefined); // awaited below; this only keeps the rejection from being unhandled
  while (!finished || pending.length > 0) {
    if (pending.length === 0) await new Promise<void>((resolve) => (wake = resolve));
    wake = undefined;
    while (pending.length > 0) yield pending.shift()!;
  }
  return toResult(await done);
}

/** Builds the WorkerHandler of an AFM agent. */
export function createMeshHandler(opts: MeshHandlerOptions): WorkerHandler {
  const { responder, signature } = opts;
  const request = (ctx: TaskContext) => {
    const history = historyOf(ctx.messages);
    return {
      sessionId: `mesh:${ctx.taskId}`,
      input: taskInput(ctx, signature),
      signature: { input: signature.input, output: signature.output },
      signal: ctx.signal,
      ...(history.length > 0 ? { history } : {}),
    };
  };
  return {
    name: opts.name,
    description: opts.description,
    inputSchema: toolInputSchema(signature),
    handle(ctx) {
      const req = request(ctx); // throws invalid_input before any model call
      const end = () => responder.endSession?.(req.sessionId);
      if (!ctx.stream) return responder.respond(req).then(toResult).finally(end);
      const gen = streamed((onDelta) => responder.respond({ ...req, onDelta }).finally(end));
      return gen;
    },
  };
}
