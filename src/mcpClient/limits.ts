/**
 * The limits and refusals every MCP client connection of AMF applies, kept in one place so the
 * stdio and HTTP transports, the hub and `amf mcp` cannot drift apart.
 */
import { AmfError } from '../errors.js';
import { checkUrl, createGuardedFetch, type GuardedFetch } from '../net/guardedFetch.js';

/** Per-request timeout when a server entry sets none (matches the config default of 30 s). */
export const DEFAULT_MCP_TIMEOUT_MS = 30_000;

/** Largest single MCP message accepted from a server (a stdio line or buffer, an HTTP body or SSE event). */
export const MAX_MCP_MESSAGE_BYTES = 10 * 1024 * 1024;

/** Tool results are cut to this many characters of text so one tool cannot flood a model's context. */
export const MAX_TOOL_RESULT_CHARS = 50_000;

/**
 * Parses and checks an MCP server URL: http(s) only, no credentials in it, never a metadata host.
 * Throws INVALID_REQUEST naming the server so the log line says which entry to fix.
 */
export function checkServerUrl(server: string, value: string | URL): URL {
  return checkUrl(value, { what: `MCP server "${server}": URL` });
}

/**
 * The guarded fetch of one MCP server's Streamable HTTP transport: every URL it is asked for is
 * checked, 3xx answers go back to the SDK (which calls again for a hop it follows, so each hop is
 * checked), and each message is capped: a JSON body as a whole, an SSE stream per event because a
 * long-lived stream carries many messages.
 */
export function createMcpFetch(
  server: string,
  options: { maxMessageBytes?: number; onOversize?: (err: AmfError) => void } = {},
): GuardedFetch {
  return createGuardedFetch({
    what: `MCP server "${server}"`,
    redirects: 'return',
    maxBytes: options.maxMessageBytes ?? MAX_MCP_MESSAGE_BYTES,
    streamCap: 'per-event',
    ...(options.onOversize ? { onOversize: options.onOversize } : {}),
  });
}

/**
 * Refuses a stdio command with a `..` path segment: a configured command must name a program on
 * PATH or a path that does not climb out of where it is written, so a config cannot reach around
 * a directory it was meant to stay in.
 */
export function checkStdioCommand(server: string, command: string): void {
  if (command.trim() === '')
    throw new AmfError('INVALID_REQUEST', `MCP server "${server}": command is empty`);
  if (command.split(/[/\\]/).includes('..'))
    throw new AmfError(
      'INVALID_REQUEST',
      `MCP server "${server}": command "${command}" contains a ".." path segment; use an absolute path or a program on PATH`,
    );
}

/** One content block of a tool result (text, image, audio, resource, ...), as MCP sends it. */
export type ToolContent = { type: string; text?: string; [key: string]: unknown };

/**
 * Cuts the text of a tool result to `limit` characters in total (text blocks in order; later text
 * blocks dropped once the budget is spent) and appends a text block saying so. Non-text blocks are
 * kept: their size is already bounded by the message cap.
 */
export function truncateContent(
  content: readonly ToolContent[],
  limit = MAX_TOOL_RESULT_CHARS,
): { content: ToolContent[]; truncated: boolean; totalChars: number } {
  const totalChars = content.reduce(
    (n, c) => n + (c.type === 'text' && typeof c.text === 'string' ? c.text.length : 0),
    0,
  );
  if (totalChars <= limit) return { content: [...content], truncated: false, totalChars };
  let budget = limit;
  const out: ToolContent[] = [];
  for (const block of content) {
    if (block.type !== 'text' || typeof block.text !== 'string') {
      out.push(block);
      continue;
    }
    if (budget <= 0) continue;
    out.push({ ...block, text: block.text.slice(0, budget) });
    budget -= Math.min(budget, block.text.length);
  }
  out.push({
    type: 'text',
    text: `[truncated: the tool returned ${totalChars} characters of text; only the first ${limit} are shown]`,
  });
  return { content: out, truncated: true, totalChars };
}
