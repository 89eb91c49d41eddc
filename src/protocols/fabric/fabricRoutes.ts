/**
 * `POST /mcp/call`, the Fabric protocol endpoint of the coordinator. A request is
 * `{name, arguments, trace?, stream?}`; the answer is `{ok, trace, result, error}` — or, with
 * `stream: true` (top level or in `arguments`), an SSE stream of `status`, `token` and `progress`
 * events ending in one `final` event whose data is that envelope. Every response carries a
 * `traceparent` header for its span.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Coordinator } from '../../coordinator/coordinator.js';
import { readBody, sendJson, type Router } from '../../http/httpKit.js';
import type { McpFederation } from '../mcp/federation.js';
import { runFabricOperation, type FabricDeps } from './fabricCall.js';
import { FabricError, fabricErrorReply } from './fabricErrors.js';
import { newTrace, toTraceparent, traceForCall, type FabricTrace } from './fabricTrace.js';

/** What the Fabric route needs. */
export interface FabricRouteDeps {
  coordinator: Coordinator;
  federation: McpFederation;
  onUnknownCapability?: (capability: string, message: string) => void;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

interface ParsedCall {
  name: string;
  args: Record<string, unknown>;
  trace: FabricTrace;
  flags: string;
  stream: boolean;
}

function parseCall(body: unknown, traceparent: string | undefined): ParsedCall {
  if (!isObject(body))
    throw new FabricError('BAD_INPUT', 'a Fabric request must be a JSON object {name, arguments}');
  const args = body.arguments ?? {};
  if (!isObject(args)) throw new FabricError('BAD_INPUT', 'arguments must be a JSON object');
  const ctx = traceForCall(body.trace, args.trace, traceparent);
  if (!ctx.ok) throw new FabricError('BAD_INPUT', ctx.message);
  if (typeof body.name !== 'string' || body.name.length === 0 || body.name.length > 256)
    throw Object.assign(
      new FabricError('BAD_INPUT', 'name is required: "fabric.call" or "fabric.tool.<category>.<name>"'),
      {
        trace: ctx.trace,
      },
    );
  const stream = body.stream ?? args.stream ?? false;
  if (typeof stream !== 'boolean')
    throw Object.assign(new FabricError('BAD_INPUT', 'stream must be a boolean'), { trace: ctx.trace });
  return { name: body.name, args, trace: ctx.trace, flags: ctx.flags, stream };
}

/** Registers `POST /mcp/call` on `router`. */
export function registerFabricRoutes(router: Router, deps: FabricRouteDeps): void {
  const { coordinator } = deps;
  const { config } = coordinator;
  const fabricDeps: FabricDeps = {
    dispatcher: coordinator.dispatcher,
    registry: coordinator.registry,
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
