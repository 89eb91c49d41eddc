/**
 * What the scripted model servers (scriptedOpenAiServer.ts, scriptedAnthropicServer.ts) share: an
 * HTTP server on 127.0.0.1 with a random port, a queue of scripted replies consumed one per model
 * call, and a record of every request so tests can assert what the agent sent. See those files for
 * the wire formats; this file holds only the script and recording machinery.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One tool call a scripted reply makes. `arguments` may be given as an object (sent as its JSON). */
export interface ScriptedToolCall {
  /** Call id; default `call_<n>` (OpenAI) or `toolu_<n>` (Anthropic). */
  readonly id?: string;
  readonly name: string;
  readonly arguments?: string | Record<string, unknown>;
}

/** What one model call answers. */
export interface ScriptedReply {
  /** Answer text (may be empty when the reply only calls tools). */
  readonly text?: string;
  readonly toolCalls?: readonly ScriptedToolCall[];
  /**
   * Wire finish reason; default `tool_calls`/`tool_use` when there are tool calls, else
   * `stop`/`end_turn`.
   */
  readonly finishReason?: string;
  /** Reply with this HTTP error status and `errorMessage` instead of an answer. */
  readonly status?: number;
  readonly errorMessage?: string;
  /** Characters per streamed text or argument fragment (default 5), to exercise reassembly. */
  readonly chunkSize?: number;
  readonly usage?: { readonly input: number; readonly output: number };
  /** OpenAI streaming only: number every tool call `index: 0`, as some servers do (ids still differ). */
  readonly sameToolIndex?: boolean;
  /** Streaming only: send the first text fragment, then drop the connection (a server that dies). */
  readonly cutStream?: boolean;
}

/** A request as the server received it. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  /** The parsed JSON body (undefined for GET or a body that is not JSON). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests navigate the wire JSON freely
  readonly body: any;
}

/** A scripted step: a fixed reply, or one computed from the request (e.g. echoing a tool result). */
export type ScriptStep = ScriptedReply | ((request: RecordedRequest) => ScriptedReply);

/** Options both servers take. */
export interface ScriptedServerOptions {
  /** Replies, one per model call, in order. */
  readonly script?: readonly ScriptStep[];
  /** When the script is used up, repeat its last step forever (a looping model); default: answer 500. */
  readonly repeatLast?: boolean;
  /** When set, requests must carry this key (else 401 in the provider's error shape). */
  readonly apiKey?: string;
}

/** A running scripted server. */
export interface ScriptedServer {
  /** Base URL to configure the client with (`…/v1` for OpenAI, the origin for Anthropic). */
  readonly url: string;
  /** Every request received, in order (model calls and others). */
  readonly requests: RecordedRequest[];
  /** Only the model calls (`/v1/chat/completions` or `/v1/messages`). */
  modelCalls(): RecordedRequest[];
  /** Appends steps to the script. */
  push(...steps: ScriptStep[]): void;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** Splits text into fragments of `size` characters (at least one fragment, possibly empty). */
export function fragments(text: string, size = 5): string[] {
  if (text.length === 0) return [];
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** The JSON text of scripted arguments. */
export function argumentsText(args: ScriptedToolCall['arguments']): string {
  return typeof args === 'string' ? args : JSON.stringify(args ?? {});
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Error('request body too large');
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/** Handles one request; returns false when the path is not served. */
export type ScriptedHandler = (
  request: RecordedRequest,
  res: ServerResponse,
  nextReply: () => ScriptedReply,
) => boolean | void;

/** Starts the shared machinery with a provider-specific handler. */
export async function startScriptedServer(
  options: ScriptedServerOptions,
  modelPath: string,
  urlSuffix: string,
  handle: ScriptedHandler,
): Promise<ScriptedServer> {
  const script: ScriptStep[] = [...(options.script ?? [])];
  const requests: RecordedRequest[] = [];
  let last: ScriptStep | undefined;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readJson(req);
      const recorded: RecordedRequest = {
        method: req.method ?? 'GET',
        path: new URL(req.url ?? '/', 'http://x').pathname,
        headers: req.headers,
        body,
      };
      requests.push(recorded);
      const nextReply = (): ScriptedReply => {
        const step = script.shift() ?? (options.repeatLast ? last : undefined);
        if (!step) return { status: 500, errorMessage: 'scripted server: the script is used up' };
        last = step;
        return typeof step === 'function' ? step(recorded) : step;
      };
      if (handle(recorded, res, nextReply) === false) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `no route ${recorded.method} ${recorded.path}` } }));
      }
    })().catch((err: Error) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: err.message } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${urlSuffix}`,
    requests,
    modelCalls: () => requests.filter((r) => r.path === modelPath),
    push: (...steps) => void script.push(...steps),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Writes one SSE event (`event:` line only when named). */
export function writeSse(res: ServerResponse, data: unknown, event?: string): void {
  res.write(
    `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`,
  );
}
