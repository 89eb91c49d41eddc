/**
 * The OpenAI-compatible provider (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio): Chat
 * Completions through the official `openai` client, with function tools, `response_format`
 * json_schema for structured output, and streaming with tool-call deltas reassembled by index.
 */
import OpenAI from 'openai';
import type {
  ChatCompletionChunk,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import { AmfError } from '../errors.js';
import { createBoundedFetch } from './boundedFetch.js';
import type { ModelSettings } from './modelSettings.js';
import type {
  ChatMessage,
  ChatModel,
  FinishReason,
  ModelCallOptions,
  ModelRequest,
  ModelResponse,
  ModelUsage,
  ToolCall,
} from './types.js';
import { withDeadline } from './deadline.js';

function toWireMessages(system: string, messages: readonly ChatMessage[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  if (system) out.push({ role: 'system', content: system });
  for (const m of messages) {
    if (m.role === 'user') out.push({ role: 'user', content: m.content });
    else if (m.role === 'tool') out.push({ role: 'tool', tool_call_id: m.toolCallId, content: m.content });
    else if (m.toolCalls && m.toolCalls.length > 0)
      out.push({
        role: 'assistant',
        content: m.content || null,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: 'function' as const,
          function: { name: c.name, arguments: c.arguments },
        })),
      });
    else out.push({ role: 'assistant', content: m.content });
  }
  return out;
}

function finishReason(raw: string | null | undefined, hasToolCalls: boolean): FinishReason {
  if (hasToolCalls) return 'tool_calls';
  switch (raw) {
    case 'stop':
      return 'stop';
    case 'tool_calls':
    case 'function_call':
      return 'tool_calls';
    case 'length':
      return 'length';
    case 'content_filter':
      return 'content_filter';
    default:
      return raw ? 'other' : 'stop';
  }
}

/** Reassembles streamed tool calls; each arrives as fragments keyed by `index`. */
class ToolCallAccumulator {
  private readonly calls: { id: string; name: string; args: string }[] = [];
  private readonly slotOfIndex = new Map<number, number>();

  add(delta: NonNullable<ChatCompletionChunk.Choice['delta']['tool_calls']>[number]): void {
    let slot = this.slotOfIndex.get(delta.index);
    // Some servers number every call 0: a new id at a used index is a new call, not a fragment.
    if (slot !== undefined && delta.id && this.calls[slot]!.id && this.calls[slot]!.id !== delta.id)
      slot = undefined;
    if (slot === undefined) {
      slot = this.calls.push({ id: '', name: '', args: '' }) - 1;
      this.slotOfIndex.set(delta.index, slot);
    }
    const call = this.calls[slot]!;
    if (delta.id) call.id = delta.id;
    if (delta.function?.name) call.name += delta.function.name;
    if (delta.function?.arguments) call.args += delta.function.arguments;
  }

  result(): ToolCall[] {
    return this.calls.map((c, i) => ({ id: c.id || `call_${i}`, name: c.name, arguments: c.args }));
  }
}

/** A `ChatModel` speaking OpenAI Chat Completions. */
export class OpenAiChatModel implements ChatModel {
  readonly kind = 'openai' as const;
  readonly provider: string;
  readonly model: string;
  readonly baseUrl: string;
  private readonly client: OpenAI;

  constructor(private readonly settings: ModelSettings) {
    this.provider = settings.provider;
    this.model = settings.model;
    this.baseUrl = settings.baseUrl;
    this.client = new OpenAI({
      baseURL: settings.baseUrl,
      // The client insists on a key; local servers take none, so the header is dropped below.
      apiKey: settings.apiKey ?? 'unused',
      // Never forward OPENAI_ORG_ID / OPENAI_PROJECT_ID from the environment to an arbitrary server.
      organization: null,
      project: null,
      timeout: settings.timeoutMs,
      maxRetries: settings.maxRetries,
      fetch: createBoundedFetch(),
      ...(settings.apiKey ? {} : { defaultHeaders: { Authorization: null } }),
    });
  }

  /**
   * Local servers (llama.cpp, Ollama, vLLM) enforce `response_format` with a grammar over the whole
   * reply, which leaves no room for a tool call: there the schema is only sent when tools are off,
   * and the instruction in the system prompt carries it otherwise. OpenAI itself combines both.
   */
  private structuredWith(toolCount: number, toolChoice: ModelRequest['toolChoice']): boolean {
    return this.provider === 'openai' || toolCount === 0 || toolChoice === 'none';
  }

  private params(request: ModelRequest): ChatCompletionCreateParamsBase {
    const tools: ChatCompletionTool[] = request.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.inputSchema },
    }));
    return {
      model: this.model,
      messages: toWireMessages(request.system, request.messages),
      // `auto` is the default with tools; sending it explicitly makes vLLM demand
      // --enable-auto-tool-choice, so only `none` is sent.
      ...(tools.length > 0 ? { tools } : {}),
      ...(tools.length > 0 && request.toolChoice === 'none' ? { tool_choice: 'none' as const } : {}),
      ...(request.structuredOutput && this.structuredWith(tools.length, request.toolChoice)
        ? {
            response_format: {
              type: 'json_schema',
              // strict: false, because strict mode accepts only a subset of JSON Schema and the
              // signature is the user's; we validate the answer ourselves anyway.
              json_schema: {
                name: request.structuredOutput.name,
                schema: request.structuredOutput.schema,
                strict: false,
              },
            },
          }
        : {}),
      ...(this.settings.maxTokensExplicit ? { max_tokens: this.settings.maxTokens } : {}),
    };
  }

  async complete(request: ModelRequest, options: ModelCallOptions = {}): Promise<ModelResponse> {
    const target = { provider: this.provider, url: this.baseUrl, model: this.model };
    return withDeadline(this.settings.timeoutMs, options.signal, target, (signal) =>
      options.onDelta ? this.stream(request, signal, options.onDelta) : this.once(request, signal),
    );
  }

  private async once(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> {
    const res = await this.client.chat.completions.create(
      { ...this.params(request), stream: false },
      { signal },
    );
    const choice = res.choices?.[0];
    if (!choice) throw new AmfError('TASK_FAILED', 'the answer has no choices');
    const message = choice.message;
    const toolCalls: ToolCall[] = (message?.tool_calls ?? [])
      .filter((c) => c.type === 'function')
      .map((c, i) => ({
        id: c.id || `call_${i}`,
        name: c.function.name,
        arguments: c.function.arguments ?? '',
      }));
    return {
      text: message?.content ?? '',
      toolCalls,
      finishReason: finishReason(choice?.finish_reason, toolCalls.length > 0),
      ...(res.usage
        ? { usage: { inputTokens: res.usage.prompt_tokens, outputTokens: res.usage.completion_tokens } }
        : {}),
    };
  }

  private async stream(
    request: ModelRequest,
    signal: AbortSignal,
    onDelta: (text: string) => void,
  ): Promise<ModelResponse> {
    const stream = await this.client.chat.completions.create(
      { ...this.params(request), stream: true },
      { signal },
    );
    let text = '';
    let rawFinish: string | null | undefined;
    let usage: ModelUsage | undefined;
    const calls = new ToolCallAccumulator();
    for await (const chunk of stream) {
      if (chunk.usage)
        usage = { inputTokens: chunk.usage.prompt_tokens, outputTokens: chunk.usage.completion_tokens };
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const delta = choice.delta;
      if (delta?.content) {
        text += delta.content;
        onDelta(delta.content);
      }
      for (const tc of delta?.tool_calls ?? []) calls.add(tc);
      if (choice.finish_reason) rawFinish = choice.finish_reason;
    }
    const toolCalls = calls.result();
    return {
      text,
      toolCalls,
      finishReason: finishReason(rawFinish, toolCalls.length > 0),
      ...(usage ? { usage } : {}),
    };
  }
}
