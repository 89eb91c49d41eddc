/**
 * Hands a worker's MCP client hub to its handlers as `ctx.tools`: one view per task whose calls
 * carry the task's abort signal, so a cancelled or timed-out task does not leave tool calls running.
 */
import type { McpClientHub, NamespacedTool, ToolResult } from './mcpClientHub.js';

/**
 * The MCP tools a handler may call: those of the worker's configured MCP servers (`mcp.servers` in
 * amf.yaml), namespaced `<server>__<tool>` and filtered by each server's allow/deny lists. Calls are
 * tied to the task: cancelling the task aborts them.
 */
export interface TaskTools {
  list(): NamespacedTool[];
  /** Calls `<server>__<tool>`; rejects with AmfError NOT_FOUND / TIMEOUT / UNAVAILABLE, resolves `isError` tool failures. */
  call(name: string, args?: Record<string, unknown>, options?: { timeoutMs?: number }): Promise<ToolResult>;
}

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
