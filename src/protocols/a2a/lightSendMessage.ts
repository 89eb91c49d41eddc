/**
 * A blocking A2A 1.0 JSON-RPC `SendMessage` of a new task without the Express layer (issue 14).
 * The SDK's Express route (content-type guard, JSON parser, router, `res.json` with its ETag hash)
 * only wraps `JsonRpcTransportHandler`, which validates the request and runs the request handler;
 * this calls that same transport handler with the same call context, so the answer and every
 * check on the way (version, params, input modes, admission, the task path) are the SDK's own.
 *
 * Only the plainest request qualifies: `A2A-Version: 1.0`, a JSON body, no `A2A-Extensions`
 * header, method `SendMessage`, a message that starts a task (no `taskId`), blocking (no
 * `returnImmediately`), no push configuration. Streaming, follow-ups of a multi-turn task,
 * non-blocking sends, A2A 0.3, the HTTP+JSON binding and every other method keep the Express path.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  defaultServerCallContextBuilder,
  JsonRpcTransportHandler,
  UnauthenticatedUser,
  validateVersion,
  type DefaultRequestHandler,
} from '@a2a-js/sdk/server';
import { HTTP_EXTENSION_HEADER } from '@a2a-js/sdk';
import { A2A_ERROR_CODE } from '@a2a-js/sdk/errors';
import { AmfError } from '../../errors.js';

/** The A2A-Version this path serves (the SDK's JSON-RPC route takes 0.3 when the header is absent). */
const LIGHT_VERSION = '1.0';

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** True when `body` (already parsed) of `req` is a request the light path serves. */
export function isLightSendMessage(
  req: IncomingMessage,
  mediaType: string | undefined,
  body: unknown,
): boolean {
  if (mediaType !== 'application/json') return false;
  if (req.headers['a2a-version'] !== LIGHT_VERSION || req.headers['a2a-extensions'] !== undefined)
    return false;
  if (!isObject(body) || body.method !== 'SendMessage' || !isObject(body.params)) return false;
  const { message, configuration } = body.params;
  if (!isObject(message) || message.taskId !== undefined) return false;
  if (configuration === undefined) return true;
  if (!isObject(configuration)) return false;
  return configuration.returnImmediately !== true && configuration.taskPushNotificationConfig === undefined;
}

/** Serves light `SendMessage` requests through the SDK's own JSON-RPC transport handler. */
export class LightSendMessage {
  private readonly transport: JsonRpcTransportHandler;
  /** Requests served by this path (tests and diagnostics). */
  served = 0;

  constructor(private readonly handler: DefaultRequestHandler) {
    this.transport = new JsonRpcTransportHandler(handler);
  }

  /** Answers `body` as the SDK's Express route would (same body, status and content type). */
  async handle(req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>): Promise<void> {
    this.served += 1;
    let status = 200;
    let answer: unknown;
    try {
      const context = defaultServerCallContextBuilder({
        extensions: [],
        user: new UnauthenticatedUser(),
        headers: req.headers,
        requestedVersion: LIGHT_VERSION,
      });
      validateVersion(LIGHT_VERSION, await this.handler.getAgentCard(), 'JSONRPC');
      const response = await this.transport.handle(body, context);
      if (typeof (response as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function')
        throw new AmfError('INTERNAL', 'SendMessage answered with a stream');
      answer = response;
      if (context.activatedExtensions)
        res.setHeader(HTTP_EXTENSION_HEADER, Array.from(context.activatedExtensions));
    } catch (err) {
      // As the SDK's route answers an error its transport handler did not map itself.
      const error = JsonRpcTransportHandler.mapToJSONRPCError(err);
      status = error.code === A2A_ERROR_CODE.INTERNAL_ERROR ? 500 : 200;
      answer = { jsonrpc: '2.0', id: body.id || null, error };
    }
    const text = JSON.stringify(answer);
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  }
}
