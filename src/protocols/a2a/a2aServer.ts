/**
 * An A2A server inside our node:http edge. The SDK's Express handlers do the protocol work (A2A 1.0
 * JSON-RPC at `/a2a`, HTTP+JSON under `/a2a/rest`, A2A 0.3 on both through its compatibility layer,
 * picked by the `A2A-Version` header); this module mounts them on the httpKit Router, reads bodies
 * itself so our size limit holds (the SDK's parser would cap at 100 KB with an HTML error), and keeps
 * every error protocol-shaped: JSON-RPC errors on `/a2a`, google.rpc.Status bodies on `/a2a/rest`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import {
  TaskState,
  type AgentCard as SdkAgentCard,
  type CancelTaskRequest,
  type GetTaskRequest,
  type Message,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
} from '@a2a-js/sdk';
import {
  DefaultExecutionEventBusManager,
  DefaultRequestHandler,
  type AgentExecutionEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type ServerCallContext,
} from '@a2a-js/sdk/server';
import { jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import {
  A2AError,
  ContentTypeNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  toRestErrorBody,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import { AmfError, toAmfError } from '../../errors.js';
import { decodePathSegment, readBody, sendJson, type Router } from '../../http/httpKit.js';
import {
  googleRpcStatusBody,
  httpStatusFor,
  JSONRPC_PARSE_ERROR,
  jsonRpcErrorBody,
} from '../../http/wireErrors.js';
import { A2A_JSONRPC_PATH, A2A_REST_PATH, supportedInterfaces, toSdkAgentCard } from './agentCards.js';
import type { BoundedTaskStore } from './boundedTaskStore.js';
import { isTerminalTaskState, messageInput } from './messageParts.js';
import { isLightSendMessage, LightSendMessage } from './lightSendMessage.js';

/** ServerCallContext.state key: true while serving SendStreamingMessage. */
export const STREAMING_KEY = 'amf.a2a.streaming';

export interface A2aServerOptions {
  /** The agent card as served (JSON); read per request so skills and URLs stay current. */
  card: () => Record<string, unknown>;
  executor: AgentExecutor;
  store: BoundedTaskStore;
  maxBodyBytes: number;
  /** Checks a new message before a task exists (routing); throws an A2A error to refuse it. */
  admit?: (params: SendMessageRequest, context: ServerCallContext) => void;
  /** True when the running task `taskId` waits for the requester's next message. */
  awaitsInput: (taskId: string) => boolean;
  /** Serve a plain blocking JSON-RPC SendMessage without Express (default true; lightSendMessage.ts). */
  lightSendMessage?: boolean;
}

/** historyLength counts messages: a negative one is a malformed request, not "no limit". */
function checkHistoryLength(value: number | undefined): void {
  if (value !== undefined && value < 0)
    throw new RequestMalformedError(`historyLength must be 0 or more, not ${value}`);
}

/**
 * The events of one task's bus, in order, until the task ends or the bus is finished. Unlike the
 * SDK's ExecutionEventQueue it goes on past input-required: a subscriber follows the whole task.
 */
async function* taskEvents(
  bus: ExecutionEventBus,
  taskId: string,
  ready: (stop: () => void) => void,
): AsyncGenerator<AgentExecutionEvent, void, undefined> {
  const queue: AgentExecutionEvent[] = [];
  let finished = false;
  let wake: (() => void) | undefined;
  const onEvent = (event: AgentExecutionEvent): void => {
    queue.push(event);
    wake?.();
  };
  const onFinished = (): void => {
    finished = true;
    wake?.();
  };
  bus.on('event', onEvent);
  bus.on('finished', onFinished);
  const stop = (): void => {
    bus.off('event', onEvent);
    bus.off('finished', onFinished);
    onFinished();
  };
  ready(stop);
  try {
    for (;;) {
      const event = queue.shift();
      if (event) {
        yield event;
        if (
          event.kind === 'statusUpdate' &&
          event.data.taskId === taskId &&
          isTerminalTaskState(event.data.status?.state)
        )
          return;
        continue;
      }
      if (finished) return;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
  } finally {
    stop();
  }
}

/** An event of the task's bus as a subscriber sees it; undefined for events of no interest to it. */
function subscriberUpdate(event: AgentExecutionEvent, taskId: string): StreamResponse | undefined {
  switch (event.kind) {
    case 'statusUpdate':
      return event.data.taskId === taskId
        ? { payload: { $case: 'statusUpdate', value: event.data } }
        : undefined;
    case 'artifactUpdate':
      return event.data.taskId === taskId
        ? { payload: { $case: 'artifactUpdate', value: event.data } }
        : undefined;
    case 'task':
      // A follow-up republishes the task (taskSession.ts): to a subscriber, who already has the
      // Task, that is its new status.
      return event.data.id === taskId && event.data.status
        ? {
            payload: {
              $case: 'statusUpdate',
              value: {
                taskId,
                contextId: event.data.contextId,
                status: event.data.status,
                metadata: event.data.metadata,
              },
            },
          }
        : undefined;
    case 'message':
      return undefined;
  }
}

/** Parts whose media type the card's defaultInputModes lacks are ContentTypeNotSupportedError. */
const VALIDATE_INPUT_MODES = true;

/** The SDK's request handler with AMF's admission checks in front of new messages. */
class AmfRequestHandler extends DefaultRequestHandler {
  /** The SDK's own bus manager, kept here too so that SubscribeToTask can follow a task's bus. */
  readonly buses: DefaultExecutionEventBusManager;
  private cardForChecks: SdkAgentCard | undefined;

  constructor(
    private readonly opts: A2aServerOptions,
    buses = new DefaultExecutionEventBusManager(),
  ) {
    // The SDK reads only capabilities from this copy (streaming on, push off); requests read the
    // live card through getAgentCard(), built when the agent's URL is known.
    super(
      toSdkAgentCard({
        name: 'amf',
        description: 'AMF agent',
        version: '0',
        supportedInterfaces: supportedInterfaces('http://127.0.0.1'),
        capabilities: { streaming: true, pushNotifications: false, extensions: [] },
      }),
      opts.store,
      opts.executor,
      buses,
      undefined,
      undefined,
      undefined,
      undefined,
      { validateInputModes: VALIDATE_INPUT_MODES },
    );
    this.buses = buses;
  }

  /**
   * CancelTask of a task already canceled is TaskNotCancelableError (A2A 1.0 section 3.1.5: a task
   * in a terminal state cannot be canceled); the SDK would answer with the task.
   */
  override async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    const task = await this.opts.store.load(params.id);
    if (task?.status?.state === TaskState.TASK_STATE_CANCELED)
      throw new TaskNotCancelableError(`task ${params.id} is already canceled`);
    return super.cancelTask(params, context);
  }

  /**
   * SubscribeToTask: the current Task, then its updates until it ends. A task that asks for input
   * goes on after the answer, so the subscription does too (the SDK's would end at input-required);
   * it ends at a terminal state, when the task's bus is finished, or when the client leaves.
   */
  override async *resubscribe(
    params: SubscribeToTaskRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const bus = this.buses.getByTaskId(params.id, context);
    if (!bus) {
      yield* super.resubscribe(params, context);
      return;
    }
    let stop: () => void = () => undefined;
    // Listening starts before the task is read, so no update falls between the two.
    const events = taskEvents(bus, params.id, (s) => (stop = s));
    const first = events.next();
    try {
      const task = await this.opts.store.load(params.id);
      if (!task) throw new TaskNotFoundError(`Task not found: ${params.id}`);
      if (isTerminalTaskState(task.status?.state))
        throw new UnsupportedOperationError(
          `Task ${params.id} is in a terminal state (${TaskState[task.status!.state]}) and cannot be subscribed to.`,
        );
      yield { payload: { $case: 'task', value: task } };
      for (let next = await first; !next.done; next = await events.next()) {
        const update = subscriberUpdate(next.value, params.id);
        if (update) yield update;
      }
    } finally {
      stop();
      await events.return(undefined);
    }
  }

  override async getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    checkHistoryLength(params.historyLength);
    return super.getTask(params, context);
  }

  override async getAgentCard() {
    return toSdkAgentCard(this.opts.card());
  }

  /**
   * The card as the light path's request checks read it (protocol versions, input modes, required
   * extensions): built once, since the agent's card fixes those for its life (agentCards.ts).
   */
  checksCard(): SdkAgentCard {
    return (this.cardForChecks ??= toSdkAgentCard(this.opts.card()));
  }

  /** AMF's checks of a message before the SDK takes it; throws an A2A error to refuse it. */
  async check(params: SendMessageRequest, context: ServerCallContext): Promise<void> {
    checkHistoryLength(params.configuration?.historyLength);
    const taskId = params.message?.taskId;
    if (taskId) {
      const existing = await this.opts.store.load(taskId);
      // Unknown and finished tasks get the SDK's own errors; a running task takes a message only
      // while its handler waits for input (input-required).
      if (existing && !isTerminalTaskState(existing.status?.state)) {
        if (!this.opts.awaitsInput(taskId))
          throw new UnsupportedOperationError(
            `task ${taskId} is working and takes a follow-up message only when it is input-required; send a new message (same contextId to continue the conversation)`,
          );
        if (params.message) messageInput(params.message);
      }
      return;
    }
    if (!this.opts.store.hasRoomForNewTask())
      throw new A2AError(
        `the task store holds ${this.opts.store.maxTasks} running tasks (a2a.task_store_size); try again later`,
      );
    if (params.message) this.opts.admit?.(params, context);
  }

  override async sendMessage(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): Promise<Message | Task> {
    await this.check(params, context);
    return super.sendMessage(params, context);
  }

  override async *sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    await this.check(params, context);
    context.state.set(STREAMING_KEY, true);
    yield* super.sendMessageStream(params, context);
  }
}

/** `POST /a2a` and `POST /a2a/` (clients differ on the slash; both are the JSON-RPC endpoint). */
function isJsonRpcPath(pathname: string): boolean {
  return pathname === A2A_JSONRPC_PATH || pathname === `${A2A_JSONRPC_PATH}/`;
}

/** The media type of a request (lower case, no parameters); undefined when there is no header. */
function mediaTypeOf(req: IncomingMessage): string | undefined {
  const raw = req.headers['content-type'];
  return raw === undefined ? undefined : raw.split(';', 1)[0]!.trim().toLowerCase();
}

/** Media types the HTTP+JSON binding takes (A2A 1.0 section 11 uses application/json). */
const REST_MEDIA_TYPES: ReadonlySet<string> = new Set(['application/json', 'application/a2a+json']);

/** A JSON-RPC 2.0 error response (the SDK's own errors share this shape). */
function sendJsonRpcError(res: ServerResponse, httpStatus: number, err: AmfError, code?: number): void {
  sendJson(res, httpStatus, jsonRpcErrorBody(err, code === undefined ? {} : { code }));
}

/** A google.rpc.Status body (AIP-193), as the HTTP+JSON binding requires for errors. */
function sendRestError(res: ServerResponse, err: AmfError, reason?: string): void {
  sendJson(res, httpStatusFor(err.code), googleRpcStatusBody(err, reason));
}

/** An A2A error of the HTTP+JSON binding, at the status A2A 1.0 section 5.4 gives it. */
function sendRestA2aError(res: ServerResponse, err: A2AError, status: number): void {
  sendJson(res, status, toRestErrorBody(err, status));
}

/** True when `body` is a google.rpc.Status whose ErrorInfo names ContentTypeNotSupportedError. */
function isContentTypeNotSupported(body: unknown): body is { error: Record<string, unknown> } {
  const error = (body as { error?: unknown } | null)?.error;
  if (typeof error !== 'object' || error === null) return false;
  const details = (error as { details?: unknown }).details;
  return (
    Array.isArray(details) &&
    details.some((d) => (d as { reason?: unknown } | null)?.reason === 'CONTENT_TYPE_NOT_SUPPORTED')
  );
}

/**
 * Brings the SDK's HTTP+JSON answers in line with A2A 1.0: responses are `application/json`
 * (section 11.4; the SDK says `application/a2a+json`), and ContentTypeNotSupportedError is HTTP 415
 * (section 5.4; the SDK answers 400), with the body's `code` saying 415 too. Both are decided when
 * the response is written.
 */
function conformRestResponse(res: ServerResponse): void {
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
  res.end = ((...args: unknown[]) => {
    if (!res.headersSent) {
      const type = res.getHeader('content-type');
      if (typeof type === 'string' && type.startsWith('application/a2a+json'))
        res.setHeader('content-type', 'application/json; charset=utf-8');
      const chunk = args[0];
      if (res.statusCode === 400 && (typeof chunk === 'string' || Buffer.isBuffer(chunk))) {
        let body: unknown;
        try {
          body = JSON.parse(String(chunk));
        } catch {
          body = undefined;
        }
        if (isContentTypeNotSupported(body)) {
          res.statusCode = 415;
          body.error.code = 415;
          const text = JSON.stringify(body);
          res.setHeader('content-length', Buffer.byteLength(text));
          // The ETag Express computed was over the old body.
          res.removeHeader('etag');
          return end(text, ...args.slice(1).filter((a) => typeof a === 'function'));
        }
      }
    }
    return end(...args);
  }) as ServerResponse['end'];
}

/** An Express app for one binding: the SDK's router, then protocol-shaped 404s and errors. */
function protocolApp(handler: express.RequestHandler, jsonRpc: boolean): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.use(handler);
  app.use((req: Request, res: Response) => {
    const e = new AmfError('NOT_FOUND', `no A2A route for ${req.method} ${req.originalUrl}`);
    if (jsonRpc) sendJsonRpcError(res, 404, e);
    else sendRestError(res, e);
  });
  // Anything the SDK's routers pass on (it maps its own errors itself) ends protocol-shaped here.
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (res.headersSent) {
      res.end();
      return;
    }
    // An error the SDK did not map is ours to answer as internal, whatever its code.
    const e = new AmfError('INTERNAL', toAmfError(err).message, undefined, { cause: err });
    if (jsonRpc) sendJsonRpcError(res, 200, e);
    else sendRestError(res, e);
  });
  return app;
}

/** The A2A endpoints of one agent (coordinator or worker). */
export class A2aServer {
  readonly requestHandler: DefaultRequestHandler;
  /** The light path of a plain blocking SendMessage (lightSendMessage.ts); undefined when off. */
  readonly light: LightSendMessage | undefined;
  private readonly jsonRpcApp: express.Express;
  private readonly restApp: express.Express;

  constructor(private readonly opts: A2aServerOptions) {
    const handler = new AmfRequestHandler(opts);
    this.requestHandler = handler;
    const common = {
      requestHandler: handler,
      userBuilder: UserBuilder.noAuthentication,
      legacyCompat: { enabled: true },
    };
    this.jsonRpcApp = protocolApp(jsonRpcHandler(common), true);
    if (opts.lightSendMessage !== false)
      this.light = new LightSendMessage({
        handler,
        store: opts.store,
        executor: opts.executor,
        buses: handler.buses,
        admit: (params, context) => handler.check(params, context),
        checksCard: () => handler.checksCard(),
        validateInputModes: VALIDATE_INPUT_MODES,
      });
    this.restApp = protocolApp(restHandler(common), false);
  }

  /** Registers `POST /a2a` and the `/a2a/rest/` tree on `router`. */
  register(router: Router): void {
    const handle = (req: IncomingMessage, res: ServerResponse, url: URL) => this.handle(req, res, url);
    router.on('POST', A2A_JSONRPC_PATH, handle);
    router.on('POST', `${A2A_JSONRPC_PATH}/`, handle);
    for (const method of ['GET', 'POST', 'DELETE']) router.onPrefix(method, `${A2A_REST_PATH}/`, handle);
  }

  /** Reads and parses the body within the limit, then hands the request to the SDK. */
  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const jsonRpc = isJsonRpcPath(url.pathname);
    // The SDK's router decodes ids in REST paths itself and answers a malformed escape (%ZZ) with a
    // 500; it is the client's mistake, so it is refused here as a 400 first.
    if (!jsonRpc) {
      try {
        for (const segment of url.pathname.split('/')) decodePathSegment(segment);
      } catch (err) {
        req.resume();
        sendRestError(res, toAmfError(err));
        return;
      }
    }
    if (!jsonRpc) conformRestResponse(res);
    if (req.method === 'POST') {
      const mediaType = mediaTypeOf(req);
      // The content type is checked before the body is read: a body of another type is not parsed.
      if (mediaType !== undefined && !jsonRpc && !REST_MEDIA_TYPES.has(mediaType)) {
        req.resume();
        sendRestA2aError(
          res,
          new ContentTypeNotSupportedError(
            `Content-Type ${mediaType.slice(0, 100)} is not supported; send application/json`,
          ),
          415,
        );
        return;
      }
      let body: Buffer;
      try {
        body = await readBody(req, this.opts.maxBodyBytes);
      } catch (err) {
        const e = toAmfError(err);
        if (jsonRpc) sendJsonRpcError(res, httpStatusFor(e.code), e);
        else sendRestError(res, e);
        return;
      }
      // A JSON-RPC body of another type is left unparsed: the SDK answers ContentTypeNotSupportedError.
      const parse =
        body.length > 0 && (!jsonRpc || mediaType === undefined || mediaType === 'application/json');
      if (parse) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(body.toString('utf8'));
        } catch (err) {
          const e = new AmfError(
            'INVALID_REQUEST',
            `request body is not valid JSON: ${(err as Error).message}`,
            undefined,
            { cause: err },
          );
          if (jsonRpc) sendJsonRpcError(res, 200, e, JSONRPC_PARSE_ERROR);
          else sendRestError(res, e, 'PARSE_ERROR');
          return;
        }
        if (jsonRpc && this.light && isLightSendMessage(req, mediaType, parsed)) {
          await this.light.handle(req, res, parsed as Record<string, unknown>);
          return;
        }
        (req as IncomingMessage & { body?: unknown }).body = parsed;
      } else (req as IncomingMessage & { body?: unknown }).body = {};
    }
    // The body is consumed, so the SDK's JSON parser skips it and uses req.body as set above. Each
    // binding has its own app, mounted at its root, so /a2a/rest/* never reaches the JSON-RPC handler.
    req.url = jsonRpc ? '/' : url.pathname.slice(A2A_REST_PATH.length) + url.search;
    (jsonRpc ? this.jsonRpcApp : this.restApp)(req as Request, res as Response);
  }
}
