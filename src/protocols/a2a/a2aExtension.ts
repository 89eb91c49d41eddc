/**
 * A protocol that travels inside A2A messages as an A2A extension (AMP does): it finds its own
 * request in a message, says where it goes, and adds its fields to the answer. The composition root
 * hands the coordinator's A2A server its extensions, so this adapter imports no other adapter.
 */
import type { TaskResult } from '../../coordinator/tasks/taskService.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';

/** A request an extension found in a message, routed to a capability tag. */
export interface ExtensionRoute {
  tag: string;
  /** The task text the mesh task gets. */
  text: string;
  /** Structured input handed to the handler as `input`. */
  data?: Record<string, unknown>;
  /** The extension's fields on the answer of the completed task, keyed by its URI there. */
  answer(result: Pick<TaskResult, 'confidence' | 'data'>): Record<string, unknown>;
}

/** An A2A extension the coordinator's A2A server routes by. */
export interface A2aExtension {
  /** The extension's URI: the key of its fields in the answer's metadata and in `extensions`. */
  readonly uri: string;
  /** Its short name, the `routedVia` of the tasks it routed. */
  readonly name: string;
  /**
   * Looks for the extension's request in `message` (the A2A message as JSON): undefined when it
   * carries none, `{ refused }` with the sentence to answer when the request is invalid or may not
   * go anywhere, else its route.
   */
  route(message: unknown, registry: AgentDirectory): ExtensionRoute | { refused: string } | undefined;
}
