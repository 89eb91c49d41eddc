/**
 * The AFM agent runtime (see agentRuntime.ts for the API): `createAgentRuntime(def, options)` →
 * `{ respond({sessionId, input, signature, signal, onDelta}), endSession, close }`, the turn loop
 * `runAgentTurn` for callers that bring their own history, and the tool providers.
 */
export {
  buildSystemPrompt,
  createAgentRuntime,
  trimHistory,
  type AgentDefinitionInput,
  type AgentReply,
  type AgentRequest,
  type AgentRuntime,
  type AgentRuntimeOptions,
  type SignatureInput,
} from './agentRuntime.js';
export {
  maxIterationsNotice,
  runAgentTurn,
  type AgentEvent,
  type AgentTurnInput,
  type AgentTurnResult,
} from './agentLoop.js';
export { inputToMessage, isTextSchema } from './outputContract.js';
export {
  connectAfmTools,
  connectedHubs,
  McpToolProvider,
  NO_TOOLS,
  type ConnectAfmToolsOptions,
  type ToolOutcome,
  type ToolProvider,
} from './toolProvider.js';
