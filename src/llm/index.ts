/**
 * Chat model providers behind one interface (`ChatModel`): OpenAI-compatible servers (OpenAI,
 * Ollama, vLLM, llama.cpp server, LM Studio) and Anthropic. `createChatModel(resolveModelSettings(
 * afm.model, process.env))` is all an agent needs; see docs/models.md.
 */
import { AnthropicChatModel } from './anthropicChatModel.js';
import type { ModelSettings } from './modelSettings.js';
import { OpenAiChatModel } from './openAiChatModel.js';
import type { ChatModel } from './types.js';

export type {
  ChatMessage,
  ChatModel,
  FinishReason,
  JsonSchema,
  ModelCallOptions,
  ModelRequest,
  ModelResponse,
  ModelUsage,
  ProviderKind,
  StructuredOutputRequest,
  ToolCall,
  ToolSpec,
} from './types.js';
export {
  DEFAULT_ANTHROPIC_BASE_URL,
  DEFAULT_ANTHROPIC_MODEL,
  DEFAULT_OPENAI_BASE_URL,
  DEFAULT_OPENAI_MODEL,
  KNOWN_PROVIDERS,
  resolveModelSettings,
  type AfmModelConfig,
  type ModelSettings,
} from './modelSettings.js';
export { ModelProviderError } from './providerErrors.js';

/** Builds the client for resolved settings. */
export function createChatModel(settings: ModelSettings): ChatModel {
  return settings.kind === 'anthropic' ? new AnthropicChatModel(settings) : new OpenAiChatModel(settings);
}
