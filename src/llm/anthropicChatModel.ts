/**
 * The Anthropic provider: the Messages API through the official `@anthropic-ai/sdk` client, with
 * `tool_use` / `tool_result` blocks and streaming (text and `input_json_delta` fragments put back
 * together per content block). Structured output is asked for in the system prompt by the runtime,
 * which works against any Messages-compatible server; the answer is validated there.
 */
import Anthropic from '@anthropic-ai/sdk';
import type {
  ContentBlockParam,
  MessageCreateParamsBase,
  MessageParam,
  Tool,
} from '@anthropic-ai/sdk/resources/messages';
import { createBoundedFetch } from './boundedFetch.js';
import { withDeadline } from './deadline.js';
import type { ModelSettings } from './modelSettings.js';
import type {
  ChatMessage,
  ChatModel,
  FinishReason,
  ModelCallOptions,
  ModelRequest,
  ModelResponse,
  ToolCall,
} from './types.js';

/**
 * The SDK client minus its credential chain: without this it would read profile files from the
 * user's config directory when no key is given. AMF takes credentials from the AFM file or the
 * environment variables it documents, nowhere else.
 */
class AmfAnthropicClient extends Anthropic {
  protected override _shouldResolveDefaultCredentials(): boolean {
    return false;
  }
}

function parseArgs(raw: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(raw || '{}');
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    // The model produced broken JSON; the loop already told it so in the tool result.
    return {};
  }
}

/** Converts the conversation; Anthropic wants tool results inside a user turn and roles alternating. */
export function toAnthropicMessages(messages: readonly ChatMessage[]): MessageParam[] {
  const out: { role: 'user' | 'assistant'; content: ContentBlockParam[] }[] = [];
  const push = (role: 'user' | 'assistant', blocks: ContentBlockParam[]): void => {
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === 'user') push('user', [{ type: 'text', text: m.content }]);
    else if (m.role === 'tool')
      push('user', [
        { type: 'tool_result', tool_use_id: m.toolCallId, content: m.content, is_error: m.isError },
      ]);
    else {
      const blocks: ContentBlockParam[] = [];
      if (m.content) blocks.push({ type: 'text', text: m.content });
      for (const c of m.toolCalls ?? [])
        blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: parseArgs(c.arguments) });
      // An empty assistant turn is refused by the API; keep the turn with a placeholder.
      push('assistant', blocks.length > 0 ? blocks : [{ type: 'text', text: '(no answer)' }]);
    }
  }
  // The API wants the conversation to open with a user turn; a history handed over from elsewhere
  // (an OpenAI-style chat through the mesh) may open with the assistant.
  if (out[0]?.role === 'assistant')
    out.unshift({ role: 'user', content: [{ type: 'text', text: '(conversation so far)' }] });
  return out;
}

function finishReason(raw: string | null | undefined, hasToolCalls: boolean): FinishReason {
  if (hasToolCalls) return 'tool_calls';
  switch (raw) {
    case 'end_turn':
    case 'stop_sequence':
    case null:
    case undefined:
      return 'stop';
    case 'tool_use':
      return 'tool_calls';
    case 'max_tokens':
      return 'length';
    case 'refusal':
      return 'content_filter';
    default:
      return 'other';
  }
}

/** A `ChatModel` speaking the Anthropic Messages API. */
export class AnthropicChatModel implements ChatModel {
  readonly kind = 'anthropic' as const;
  readonly provider: string;
  readonly model: string;
  readonly baseUrl: string;
  private readonly client: Anthropic;

  constructor(private readonly settings: ModelSettings) {
    this.provider = settings.provider;
    this.model = settings.model;
    this.baseUrl = settings.baseUrl;
    const key = settings.apiKey;
    this.client = new AmfAnthropicClient({
      baseURL: settings.baseUrl,
      ...(key === undefined
        ? // No key configured (a local Messages-compatible server): send no Authorization at all.
          { apiKey: null, authToken: null, defaultHeaders: { Authorization: null } }
        : settings.authType === 'bearer'
          ? { authToken: key, apiKey: null }
          : { apiKey: key, authToken: null }),
      timeout: settings.timeoutMs,
      maxRetries: settings.maxRetries,
      fetch: createBoundedFetch(),
      logLevel: 'off',
    });
  }

  private params(request: ModelRequest): MessageCreateParamsBase {
    const tools: Tool[] = request.tools.map((t) => ({
      name: t.name,
      description: t.description,
      input_schema: { type: 'object', ...t.inputSchema } as Tool['input_schema'],
    }));
    return {
      model: this.model,
      max_tokens: this.settings.maxTokens,
      ...(request.system ? { system: request.system } : {}),
      messages: toAnthropicMessages(request.messages),
      // `auto` is the API's default; only `none` is sent, so older compatible servers are not tripped.
      ...(tools.length > 0 ? { tools } : {}),
      ...(tools.length > 0 && request.toolChoice === 'none' ? { tool_choice: { type: 'none' } } : {}),
    };
  }

  async complete(request: ModelRequest, options: ModelCallOptions = {}): Promise<ModelResponse> {
    const target = { provider: this.provider, url: this.baseUrl, model: this.model };
    return withDeadline(this.settings.timeoutMs, options.signal, target, (signal) =>
      options.onDelta ? this.stream(request, signal, options.onDelta) : this.once(request, signal),
    );
  }

  private async once(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> {
    const res = await this.client.messages.create({ ...this.params(request), stream: false }, { signal });
    let text = '';
    const toolCalls: ToolCall[] = [];
    for (const block of res.content ?? []) {
      if (block.type === 'text') text += block.text;
      else if (block.type === 'tool_use')
        toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
    }
    return {
      text,
      toolCalls,
      finishReason: finishReason(res.stop_reason, toolCalls.length > 0),
      ...(res.usage
        ? { usage: { inputTokens: res.usage.input_tokens, outputTokens: res.usage.output_tokens } }
        : {}),
    };
  }

  private async stream(
    request: ModelRequest,
    signal: AbortSignal,
    onDelta: (text: string) => void,
  ): Promise<ModelResponse> {
    const stream = await this.client.messages.create({ ...this.params(request), stream: true }, { signal });
    let text = '';
    let stopReason: string | null | undefined;
    let inputTokens = 0;
    let outputTokens = 0;
    // Tool calls by content-block index; their input arrives as JSON fragments.
    const tools = new Map<number, { id: string; name: string; json: string; initial: unknown }>();
    for await (const event of stream) {
      switch (event.type) {
        case 'message_start':
          inputTokens = event.message.usage?.input_tokens ?? 0;
          break;
        case 'content_block_start':
          if (event.content_block.type === 'tool_use')
            tools.set(event.index, {
              id: event.content_block.id,
              name: event.content_block.name,
              json: '',
              initial: event.content_block.input,
            });
          else if (event.content_block.type === 'text' && event.content_block.text) {
            text += event.content_block.text;
            onDelta(event.content_block.text);
          }
          break;
        case 'content_block_delta':
          if (event.delta.type === 'text_delta') {
            text += event.delta.text;
            onDelta(event.delta.text);
          } else if (event.delta.type === 'input_json_delta') {
            const tool = tools.get(event.index);
            if (tool) tool.json += event.delta.partial_json;
          }
          break;
        case 'message_delta':
          stopReason = event.delta.stop_reason;
          outputTokens = event.usage?.output_tokens ?? outputTokens;
          break;
        default:
          break;
      }
    }
    const toolCalls: ToolCall[] = [...tools.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, t]) => ({
        id: t.id,
        name: t.name,
        // A tool without input fragments carries its (usually empty) input in the start block.
        arguments: t.json || JSON.stringify(t.initial ?? {}),
      }));
    return {
      text,
      toolCalls,
      finishReason: finishReason(stopReason, toolCalls.length > 0),
      usage: { inputTokens, outputTokens },
    };
  }
}
