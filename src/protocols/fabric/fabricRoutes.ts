/**
 * `POST /mcp/call`, the Fabric protocol endpoint of the coordinator. A request is
 * `{name, arguments, trace?, stream?}`; the answer is `{ok, trace, result, error}` — or, with
 * `stream: true` (top level or in `arguments`), an SSE stream of `status`, `token` and `progress`
 * events ending in one `final` event whose data is that envelope. Every response carries a
 * `traceparent` header for its span.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AmfConfig } from '../../config/config.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import { bodyValidator } from '../../http/bodyValidator.js';
import { readBody, sendJson, type Router } from '../../http/httpKit.js';
import { runFabricOperation, type FabricDeps, type FabricToolCatalog } from './fabricCall.js';
import { FABRIC_REQUEST_SCHEMA, type FabricRequestBody } from './fabricCallSchema.js';
import { FabricError, fabricErrorReply } from './fabricErrors.js';
import { newTrace, toTraceparent, traceForCall, type FabricTrace } from './fabricTrace.js';

/** What the Fabric route needs: the mesh's tasks and agents, never the Coordinator. */
export interface FabricRouteDeps {
  tasks: FabricDeps['tasks'];
  agents: AgentDirectory;
  config: AmfConfig;
  federation: FabricToolCatalog;
  onUnknownCapability?: (capability: string, message: string) => void;
}

interface ParsedCall {
  name: string;
  args: Record<string, unknown>;
  trace: FabricTrace;
  flags: string;
  stream: boolean;
}

const checkRequest = bodyValidator<FabricRequestBody>(FABRIC_REQUEST_SCHEMA);

/** The caller's trace if one can be read from `body` (so even a refused call keeps its trace id). */
function traceOf(body: unknown, traceparent: string | undefined): FabricTrace | undefined {
  const b =
    typeof body === 'object' && body !== null ? (body as { trace?: unknown; arguments?: unknown }) : {};
  const args =
    typeof b.arguments === 'object' && b.arguments !== null ? (b.arguments as { trace?: unknown }) : {};
  const ctx = traceForCall(b.trace, args.trace, traceparent);
  return ctx.ok ? ctx.trace : undefined;
}

function parseCall(body: unknown, traceparent: string | undefined): ParsedCall {
  const checked = checkRequest(body);
  if (!checked.ok) {
    const trace = traceOf(body, traceparent);
    throw Object.assign(new FabricError('BAD_INPUT', checked.problem.message), trace ? { trace } : {});
  }
  const args = checked.value.arguments ?? {};
  const ctx = traceForCall(checked.value.trace, args.trace, traceparent);
  if (!ctx.ok) throw new FabricError('BAD_INPUT', ctx.message);
  const stream = checked.value.stream ?? args.stream ?? false;
  if (typeof stream !== 'boolean')
    throw Object.assign(new FabricError('BAD_INPUT', 'arguments.stream must be a boolean'), {
      trace: ctx.trace,
    });
  return { name: checked.value.name, args, trace: ctx.trace, flags: ctx.flags, stream };
}

/** Registers `POST /mcp/call` on `router`. */
export function registerFabricRoutes(router: Router, deps: FabricRouteDeps): void {
  const { config } = deps;
  const fabricDeps: FabricDeps = {
    tasks: deps.tasks,
    agents: deps.agents,
    federation: deps.federation,
    requestTimeoutMs: config.http.requestTimeoutSeconds * 1000,
    maxTaskBytes: config.tasks.maxTaskBytes,
    ...(deps.onUnknownCapability ? { onUnknownCapability: deps.onUnknownCapability } : {}),
  };
  router.on('POST', '/mcp/call', async (req: IncomingMessage, res: ServerResponse) => {
    let call: ParsedCall;
    try {
      const raw = await readBody(req, config.http.maxBodyBytes);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch (err) {
        throw new FabricError(
          'BAD_INPUT',
          `request body is not valid JSON: ${(err as Error).message}`,
          undefined,
          { cause: err },
        );
      }
      const header = req.headers.traceparent;
      call = parseCall(body, Array.isArray(header) ? header[0] : header);
    } catch (err) {
      const trace = (err as { trace?: FabricTrace }).trace ?? newTrace();
      const reply = fabricErrorReply(err, trace);
      sendJson(res, reply.status, reply.body, { traceparent: toTraceparent(trace) });
      return;
    }
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    const traceparent = toTraceparent(call.trace, call.flags);
    const ctx = {
      trace: call.trace,
      caller: req.socket.remoteAddress ?? 'unknown',
      signal: controller.signal,
      stream: call.stream,
    };
    if (!call.stream) {
      try {
        const result = await runFabricOperation(call.name, call.args, fabricDeps, ctx);
        sendJson(res, 200, { ok: true, trace: call.trace, result, error: null }, { traceparent });
      } catch (err) {
        const reply = fabricErrorReply(err, call.trace);
        if (!res.headersSent) sendJson(res, reply.status, reply.body, { traceparent });
      }
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      traceparent,
    });
    const send = (event: string, data: Record<string, unknown>) => {
      if (!res.writableEnded) res.write(`event: ${event}\ndata: ${JSON.stringify({ event, data })}\n\n`);
    };
    try {
      const result = await runFabricOperation(call.name, call.args, fabricDeps, {
        ...ctx,
        onEvent: (event, data) => send(event, { ...data, trace: call.trace }),
      });
      send('final', { ok: true, trace: call.trace, result, error: null });
    } catch (err) {
      send('final', fabricErrorReply(err, call.trace).body);
    }
    res.end();
  });
}
