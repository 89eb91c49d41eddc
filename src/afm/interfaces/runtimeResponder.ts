/**
 * Adapts the AFM agent runtime (src/afm/runtime) to the interfaces' AgentResponder. The runtime keeps
 * history per session; a caller that carries its own conversation (an OpenAI chat request through the
 * mesh) gets a one-off turn over that history instead, so a mesh task never leaks into a session.
 */
import type { AgentRuntime } from '../runtime/index.js';
import { inputToMessage, runAgentTurn } from '../runtime/index.js';
import type { AgentResponder, RespondRequest, RespondResult } from './responder.js';

/** The responder of a runtime. */
export function runtimeResponder(runtime: AgentRuntime): AgentResponder {
  return {
    respond(req: RespondRequest): Promise<RespondResult> {
      if (!req.history || req.history.length === 0) return runtime.respond(req);
      return runAgentTurn({
        model: runtime.model,
        systemPrompt: runtime.systemPrompt,
        history: req.history.map((t) => ({ role: t.role, content: t.content })),
        userMessage: inputToMessage(req.input, req.signature?.input),
        tools: runtime.tools,
        maxIterations: runtime.maxIterations,
        outputSchema: req.signature?.output,
        signal: req.signal,
        onDelta: req.onDelta,
      });
    },
    endSession: (sessionId) => runtime.endSession(sessionId),
  };
}
