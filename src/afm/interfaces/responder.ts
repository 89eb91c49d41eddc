/**
 * The one thing every AFM interface needs from an agent: answer one input within a session. The
 * interfaces (console, webchat, webhook, mesh) know nothing of models, tools or prompts; the agent
 * runtime implements this, and tests plug in a tiny in-process responder.
 */

import type { JsonSchema } from '../types.js';

/** One earlier turn of a conversation. */
export interface ConversationTurn {
  role: 'user' | 'assistant';
  content: string;
}

/** One request to the agent. */
export interface RespondRequest {
  /** Conversation key; the responder keeps history per session. Interfaces namespace it (`webchat:…`). */
  sessionId: string;
  /** The input, already checked against the interface's `signature.input` (a string by default). */
  input: unknown;
  /** The calling interface's contract (the runtime asks for and validates this output shape). */
  signature?: { input?: JsonSchema; output?: JsonSchema };
  /** Aborted when the caller went away or the agent is shutting down. */
  signal?: AbortSignal;
  /**
   * Earlier turns the caller carries itself (an OpenAI chat request through the mesh), oldest first;
   * used instead of the session's own history when given.
   */
  history?: readonly ConversationTurn[];
  /** Called with each piece of answer text as the model streams it. */
  onDelta?: (text: string) => void;
}

/** What the agent answered. */
export interface RespondResult {
  /** The output in the shape of `signature.output` (a string by default). */
  output: unknown;
  /** The answer as text (the output itself for strings, else its JSON). */
  text: string;
  /**
   * Why the run ended when it was not a normal answer, e.g. `max_iterations` (the text then says so):
   * interfaces surface it (HTTP header `x-afm-stop-reason`, SSE `done` event).
   */
  stopReason?: string;
}

/** An agent that answers inputs. */
export interface AgentResponder {
  respond(request: RespondRequest): Promise<RespondResult>;
  /** Forgets a session's history (the session store evicted it). Optional. */
  endSession?(sessionId: string): void;
}
