/**
 * What a TypeScript handler may serve on its worker's `/mcp` besides the handler tool itself: more
 * tools, resources, resource templates, prompts and completions (`WorkerHandler.mcp`). The shapes
 * are the MCP wire types of the official SDK, so a handler author writes what the spec shows; the
 * worker's endpoint (protocols/mcp/worker/surface.ts) does the protocol work (listing, lookup,
 * logging levels, subscriptions).
 */
import type {
  CallToolResult,
  CompleteRequest,
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult,
  GetPromptResult,
  LoggingLevel,
  Prompt,
  ReadResourceResult,
  Resource,
  ResourceTemplate,
  Tool,
} from '@modelcontextprotocol/sdk/types.js';

/** What a served tool, resource or prompt may do while it runs (one MCP request of one session). */
export interface McpRequestContext {
  /** Aborted when the client cancels or goes away. */
  signal: AbortSignal;
  /** Reports progress to the caller (a no-op when the caller asked for none). */
  progress(progress: number, total?: number, message?: string): Promise<void>;
  /** Sends a log message to the client (filtered by the level the client set). */
  log(level: LoggingLevel, data: unknown, logger?: string): Promise<void>;
  /** Asks the client's model (`sampling/createMessage`); fails when the client does not offer it. */
  sample(params: CreateMessageRequest['params']): Promise<CreateMessageResult>;
  /** Asks the client's user (`elicitation/create`); fails when the client does not offer it. */
  elicit(params: ElicitRequest['params']): Promise<ElicitResult>;
}

/** An extra MCP tool of a handler. */
export interface HandlerMcpTool {
  definition: Tool;
  call(args: Record<string, unknown>, ctx: McpRequestContext): Promise<CallToolResult>;
}

/** A direct resource (fixed URI). */
export interface HandlerMcpResource {
  resource: Resource;
  read(ctx: McpRequestContext): Promise<ReadResourceResult>;
}

/** A resource template (RFC 6570 level 1: `{name}` segments). */
export interface HandlerMcpResourceTemplate {
  template: ResourceTemplate;
  read(uri: string, variables: Record<string, string>, ctx: McpRequestContext): Promise<ReadResourceResult>;
}

/** A prompt. */
export interface HandlerMcpPrompt {
  prompt: Prompt;
  get(args: Record<string, string>, ctx: McpRequestContext): Promise<GetPromptResult>;
}

/** Everything a handler serves over MCP besides its own tool. */
export interface HandlerMcpSurface {
  tools?: HandlerMcpTool[];
  resources?: HandlerMcpResource[];
  resourceTemplates?: HandlerMcpResourceTemplate[];
  prompts?: HandlerMcpPrompt[];
  /** Suggestions for a prompt or template argument (`completion/complete`); values, best first. */
  complete?(params: CompleteRequest['params']): Promise<string[]>;
  /**
   * Resources may be subscribed to; the handler calls `notify(uri)` when one changed (wired by the
   * endpoint at start).
   */
  subscriptions?: { onUpdate(notify: (uri: string) => void): void };
  /** Announce the logging capability (clients may set a level; `ctx.log` works either way). */
  logging?: boolean;
}
