/**
 * Hands a worker's MCP client hub to its handlers as `ctx.tools`: one view per task whose calls
 * carry the task's abort signal, so a cancelled or timed-out task does not leave tool calls running.
 */
import type { TaskTools } from '../worker/handlerApi.js';
import type { McpClientHub } from './mcpClientHub.js';

/** The `ctx.tools` of one task over `hub`. */
export function bindTaskTools(hub: McpClientHub, signal: AbortSignal): TaskTools {
  return {
    list: () => hub.listTools(),
    call: (name, args = {}, options = {}) =>
      hub.callTool(name, args, {
        signal,
        ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      }),
  };
}
