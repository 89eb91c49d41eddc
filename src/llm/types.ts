/**
 * The provider-neutral shape of a chat model call: what the agent loop sends (system prompt,
 * conversation, tools) and what it gets back (text, tool calls, why the model stopped). Each
 * provider adapter (OpenAI-compatible, Anthropic) translates this to and from its own wire format,
 * so the loop never sees a vendor type.
 */

/** A JSON Schema object as written in an AFM signature or an MCP tool's `inputSchema`. */
export type JsonSchema = Record<string, unknown>;

/** One tool the model may call. `name` must match `[A-Za-z0-9_.-]{1,64}` (both APIs demand it). */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
}

/** One tool call the model asked for; `arguments` is the raw JSON text it produced (may be invalid). */
export interface ToolCall {
  /** The provider's call id, echoed back with the result so the model can pair them. */
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

/** One message of a conversation, in the loop's own terms. */
export type ChatMessage =
  | { readonly role: 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly toolCalls?: readonly ToolCall[] }
  | {
      readonly role: 'tool';
      readonly toolCallId: string;
      /** The tool's name (Anthropic does not need it; some OpenAI-compatible servers do). */
      readonly name: string;
      readonly content: string;
      readonly isError: boolean;
    };

/** Structured output wanted from the model: a JSON value validating against `schema`. */
export interface StructuredOutputRequest {
  /** Schema name sent to APIs that take one (`[A-Za-z0-9_-]{1,64}`). */
  readonly name: string;
  /** Always an object schema: non-object signatures are wrapped by the runtime first. */
  readonly schema: JsonSchema;
}

/** One model call. */
export interface ModelRequest {
  readonly system: string;
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly ToolSpec[];
  /** `none` forbids tool calls for this turn (used for the repair turn). Default `auto`. */
  readonly toolChoice?: 'auto' | 'none';
  readonly structuredOutput?: StructuredOutputRequest;
}

/** Why the model stopped, normalized across providers. */
export type FinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'other';

/** Token counts when the provider reports them. */
export interface ModelUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** What one model call produced. */
export interface ModelResponse {
  readonly text: string;
  readonly toolCalls: readonly ToolCall[];
  readonly finishReason: FinishReason;
  readonly usage?: ModelUsage;
}

/** Options of one model call. */
export interface ModelCallOptions {
  readonly signal?: AbortSignal;
  /** When given, the call streams and every text fragment is passed here as it arrives. */
  readonly onDelta?: (text: string) => void;
}

/** Which wire protocol a model speaks. */
export type ProviderKind = 'openai' | 'anthropic';

/** A chat model behind one of the supported wire protocols. */
export interface ChatModel {
  readonly kind: ProviderKind;
  /** The provider name as configured (`openai`, `ollama`, `anthropic`, ...), for messages. */
  readonly provider: string;
  readonly model: string;
  /** Base URL the client talks to, for messages (never carries credentials). */
  readonly baseUrl: string;
  /** Runs one call; rejects with a `ModelProviderError` that names provider, URL and status. */
  complete(request: ModelRequest, options?: ModelCallOptions): Promise<ModelResponse>;
}
