/**
 * The federation's `tools/call` to an agent without the SDK client's request machinery (issue 14):
 * one JSON-RPC POST in the shared client's session (its session id and negotiated protocol
 * revision), over the agent's own connections, pin and headers (callAuth.ts), the answer read whole
 * and parsed once. The SDK client parsed every message in and out with zod and built web
 * Request/Response objects for each call; that was most of the coordinator's CPU per proxied call.
 *
 * Messages in the answer other than the call's response (log messages, list changes, a request of
 * the agent) are handed to the shared client's transport, so the client handles them as if it had
 * read them itself. Calls that need progress or their own connection keep the SDK client.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ErrorCode,
  McpError,
  type CallToolResult,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import type { AgentFetch } from './callAuth.js';

/** What one direct call needs. */
export interface DirectCall {
  client: Client;
  fetch: AgentFetch;
  endpoint: string;
  tool: string;
  args: Record<string, unknown>;
  timeoutMs: number;
  signal?: AbortSignal;
}

let nextId = 0;

/**
 * The agent's result of the call, or undefined when the shared client has no session to call in
 * (the caller then uses the SDK client). Throws McpError for the agent's JSON-RPC error, Error for
 * HTTP and transport failures.
 */
export async function callToolDirect(call: DirectCall): Promise<CallToolResult | undefined> {
  const transport = call.client.transport as StreamableHTTPClientTransport | undefined;
  const sessionId = transport?.sessionId;
  if (!transport || sessionId === undefined) return undefined;
  // A string id of our own: it cannot collide with the SDK client's numeric ids in the same session.
  const id = `amf-direct-${++nextId}`;
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name: call.tool, arguments: call.args },
  });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-session-id': sessionId,
  };
  if (transport.protocolVersion) headers['mcp-protocol-version'] = transport.protocolVersion;
  // A timer cleared when the call ends (AbortSignal.timeout would keep one per call for the whole
  // time limit), and the caller's signal followed while the call runs.
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
  }, call.timeoutMs);
  const follow = () => abort.abort(call.signal?.reason);
  if (call.signal?.aborted) follow();
  else call.signal?.addEventListener('abort', follow, { once: true });
  let answer;
  try {
    answer = await call.fetch.post(call.endpoint, headers, body, abort.signal);
  } catch (err) {
    if (timedOut)
      throw new McpError(ErrorCode.RequestTimeout, `Request timed out after ${call.timeoutMs} ms`);
    throw err;
  } finally {
    clearTimeout(timer);
    call.signal?.removeEventListener('abort', follow);
  }
  if (answer.status === 404) {
    // The agent ended the session (restart, idle expiry): a new client connects on the next call.
    void call.client.close().catch(() => undefined);
    throw new Error(`the agent's MCP session ended (HTTP 404); the next call opens a new one`);
  }
  if (answer.status < 200 || answer.status >= 300)
    throw new Error(`HTTP ${answer.status} from the agent: ${answer.body.toString('utf8', 0, 300)}`);
  const messages = parseAnswer(answer.contentType, answer.body.toString('utf8'));
  let response: Record<string, unknown> | undefined;
  for (const message of messages) {
    if (isObject(message) && message.id === id && !('method' in message)) response = message;
    else transport.onmessage?.(message as JSONRPCMessage);
  }
  if (!response) throw new Error('the agent answered without a response to the call');
  if (isObject(response.error)) {
    const { code, message, data } = response.error;
    throw new McpError(typeof code === 'number' ? code : -32603, String(message ?? 'error'), data);
  }
  const result = response.result;
  if (!isObject(result) || (result.content !== undefined && !Array.isArray(result.content)))
    throw new Error('the agent answered tools/call with a malformed result');
  return { ...result, content: (result.content ?? []) as CallToolResult['content'] } as CallToolResult;
}

/** The JSON-RPC messages of an answer: one JSON body, or the `data` of each SSE event. */
function parseAnswer(contentType: string, text: string): unknown[] {
  if (contentType.toLowerCase().startsWith('text/event-stream')) {
    const out: unknown[] = [];
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
      // Events without data (a priming event with only an id) carry no message.
      if (data.length > 0 && data.join('') !== '') out.push(JSON.parse(data.join('\n')));
    }
    return out;
  }
  const parsed: unknown = JSON.parse(text);
  return Array.isArray(parsed) ? parsed : [parsed];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
