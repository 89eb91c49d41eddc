/**
 * A blocking A2A 1.0 JSON-RPC `SendMessage` of a new task, served without the Express layer and
 * without the SDK request handler's per-event machinery (issue 14, issue 31).
 *
 * The SDK's `sendMessage` runs every event of a task through an event queue and a result manager
 * that loads, merges and saves the task in the store, and deep-copies the task once more per event
 * for push notifications (off here). This path takes the same steps for a blocking new task, in
 * the same order and with the same errors: AMF's admission checks, the message id, input modes,
 * required extensions, a bus registered for the task (CancelTask and SubscribeToTask find it), the
 * executor, the bus settled when the executor returns. Then:
 *
 * - An executor that ends a task of which nothing was published (no client can know its id yet, so
 *   none can have read, cancelled or followed it) may hand the final Task or Message to
 *   {@link DIRECT_ANSWER_KEY} instead of publishing its events: the Task is stored once and both are
 *   answered. taskSession.ts builds the Task as the events would have left it in the store.
 * - Published events go through the SDK's own ResultManager, as in `sendMessage`, until the one that
 *   would stop its event queue (a Message, input-required, an end).
 *
 * Only the plainest request qualifies: `A2A-Version: 1.0`, a JSON body, no `A2A-Extensions` header,
 * method `SendMessage`, a message that starts a task (no `taskId`), blocking (no
 * `returnImmediately`), no push configuration. A request that is not a well-formed JSON-RPC call,
 * names a tenant or refers to other tasks goes to the SDK's own JSON-RPC transport handler; streaming,
 * follow-ups of a multi-turn task, non-blocking sends, A2A 0.3, the HTTP+JSON binding and every
 * other method keep the Express path (a2aServer.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import {
  HTTP_EXTENSION_HEADER,
  Message,
  Role,
  SendMessageRequest,
  Task,
  TaskState,
  type AgentCard,
} from '@a2a-js/sdk';
import {
  AgentEvent,
  defaultServerCallContextBuilder,
  JsonRpcTransportHandler,
  RequestContext,
  ResultManager,
  UnauthenticatedUser,
  validateVersion,
  type AgentExecutionEvent,
  type AgentExecutor,
  type DefaultRequestHandler,
  type ExecutionEventBus,
  type ExecutionEventBusManager,
  type ServerCallContext,
} from '@a2a-js/sdk/server';
import {
  A2A_ERROR_CODE,
  A2AError,
  ContentTypeNotSupportedError,
  ExtensionSupportRequiredError,
  RequestMalformedError,
} from '@a2a-js/sdk/errors';
import { AmfError } from '../../errors.js';
import type { BoundedTaskStore } from './boundedTaskStore.js';
import { stopsSdkQueue } from './taskPersistence.js';

/** The A2A-Version this path serves (the SDK's JSON-RPC route takes 0.3 when the header is absent). */
const LIGHT_VERSION = '1.0';

/**
 * ServerCallContext.state key of a {@link DirectAnswer}: set while a request of this path waits
 * for its task, absent on every other path.
 */
export const DIRECT_ANSWER_KEY = 'amf.a2a.directAnswer';

/**
 * Takes the end of a task that published no event: its final Task (as the store is to keep it) or
 * the Message that answers it. Called at most once, and only when nothing was published before.
 */
export type DirectAnswer = (answer: Task | Message) => void;

/** States in which the SDK keeps a task's bus alive when its executor returns (INTERRUPTED_STATE_LIST). */
const BUS_KEPT_IN: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);

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

/**
 * True when the SDK's transport handler would take `body` as it is (a valid JSON-RPC 2.0 call with
 * valid params) and run nothing this path leaves out: no tenant, no referenced tasks.
 */
function isPlainCall(body: Record<string, unknown>): boolean {
  if (body.jsonrpc !== '2.0') return false;
  const { id } = body;
  if ('id' in body && typeof id !== 'string' && id !== null && !Number.isInteger(id)) return false;
  const params = body.params as Record<string, unknown>;
  if (Object.keys(params).some((key) => key === '') || params.tenant !== undefined) return false;
  const refs = (params.message as Record<string, unknown>).referenceTaskIds;
  return refs === undefined || (Array.isArray(refs) && refs.length === 0);
}

/** What the light path needs of the A2A server it is part of. */
export interface LightSendMessageDeps {
  /** The SDK request handler: answers what this path hands on (isPlainCall). */
  handler: DefaultRequestHandler;
  store: Pick<BoundedTaskStore, 'load' | 'save' | 'list' | 'adopt'>;
  executor: AgentExecutor;
  /** The request handler's bus manager, so CancelTask and SubscribeToTask find the task's bus. */
  buses: ExecutionEventBusManager;
  /** AMF's checks of a new message before a task exists (AmfRequestHandler.check); throws to refuse. */
  admit: (params: SendMessageRequest, context: ServerCallContext) => Promise<void>;
  /**
   * The card the request checks read: protocol versions, default input modes and required
   * extensions, which the agent's card fixes for its life; none of its changing fields are read.
   */
  checksCard: () => AgentCard;
  /** The request handler checks parts against the card's input modes (its validateInputModes). */
  validateInputModes: boolean;
}

/** Serves light `SendMessage` requests (see the module comment). */
export class LightSendMessage {
  private readonly transport: JsonRpcTransportHandler;
  /** Requests served by this path (tests and diagnostics). */
  served = 0;
  /** Tasks this path answered without publishing an event (tests and diagnostics). */
  answeredDirectly = 0;

  constructor(private readonly deps: LightSendMessageDeps) {
    this.transport = new JsonRpcTransportHandler(deps.handler);
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
      validateVersion(LIGHT_VERSION, this.deps.checksCard(), 'JSONRPC');
      answer = isPlainCall(body)
        ? await this.call(body, context)
        : await this.transport.handle(body, context);
      if (typeof (answer as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function')
        throw new AmfError('INTERNAL', 'SendMessage answered with a stream');
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

  /** The JSON-RPC response to a plain call, as the SDK's transport handler shapes it. */
  private async call(body: Record<string, unknown>, context: ServerCallContext): Promise<unknown> {
    const id = body.id ?? null;
    try {
      const result = await this.send(SendMessageRequest.fromJSON(body.params), context);
      return {
        jsonrpc: '2.0',
        id,
        result: 'messageId' in result ? { message: Message.toJSON(result) } : { task: Task.toJSON(result) },
      };
    } catch (err) {
      return { jsonrpc: '2.0', id, error: JsonRpcTransportHandler.mapToJSONRPCError(err) };
    }
  }

  /** `sendMessage` of a blocking new task: the checks, then the task run to its first stop. */
  private async send(params: SendMessageRequest, context: ServerCallContext): Promise<Task | Message> {
    await this.deps.admit(params, context);
    const message = params.message;
    if (!message?.messageId) throw new RequestMalformedError('message.messageId is required.');
    const card = this.deps.checksCard();
    this.checkInputModes(message, card);
    const required = (card.capabilities?.extensions ?? []).filter((e) => e.required).map((e) => e.uri);
    const requested = new Set(context.requestedExtensions ?? []);
    const missing = required.filter((uri) => !requested.has(uri));
    if (missing.length > 0)
      throw new ExtensionSupportRequiredError(
        `Client must declare support for required extensions: ${missing.join(', ')}`,
      );
    const taskId = randomUUID();
    const contextId = message.contextId || randomUUID();
    const rc = ownedRequestContext({ ...params, message: { ...message, contextId, taskId } }, context);
    const result = await this.run(rc, params);
    const historyLength = params.configuration?.historyLength;
    if (historyLength === undefined || !('id' in result)) return result;
    // A copy, not the task itself: the store may hold this very object (adopt).
    return { ...result, history: historyLength <= 0 ? [] : result.history.slice(-historyLength) };
  }

  /** A part whose media type the card does not list is ContentTypeNotSupportedError, as in the SDK. */
  private checkInputModes(message: Message, card: AgentCard): void {
    const modes = card.defaultInputModes ?? [];
    if (!this.deps.validateInputModes || modes.length === 0) return;
    for (const part of message.parts ?? [])
      if (part.mediaType && !modes.includes(part.mediaType))
        throw new ContentTypeNotSupportedError(
          `Media type '${part.mediaType}' is not supported. Supported media types: ${modes.join(', ')}.`,
        );
  }

  /**
   * Runs the executor on the task's bus and resolves with the task (or message) as it stands at
   * the first event that would stop the SDK's queue, or with the executor's direct answer.
   */
  private run(rc: RequestContext, params: SendMessageRequest): Promise<Task | Message> {
    const { store, buses, executor } = this.deps;
    const { taskId, context } = rc;
    const bus = buses.createOrGetByTaskId(taskId, context);
    return new Promise<Task | Message>((resolve, reject) => {
      // The SDK's result manager, made at the first event (a task answered directly has none).
      let results: ResultManager | undefined;
      let chain = Promise.resolve();
      // Events are taken until the one that would stop the SDK's queue (or the bus finishes).
      let listening = true;
      let settled = false;
      const settle = (outcome: () => Task | Message): void => {
        if (settled) return;
        settled = true;
        try {
          resolve(outcome());
        } catch (err) {
          reject(err);
        }
      };
      const fail = (err: unknown): void => {
        listening = false;
        if (settled) return;
        settled = true;
        reject(err);
      };
      // The state the bus is settled by when the executor returns (the SDK tracks it the same way).
      let lastState: TaskState | undefined;
      const finalResult = (): Task | Message => {
        const result = results?.getFinalResult();
        if (!result)
          throw new A2AError('Agent execution finished without a result, and no task context found.');
        return result;
      };
      const onEvent = (event: AgentExecutionEvent): void => {
        if (event.kind === 'task' || event.kind === 'statusUpdate')
          lastState = event.data.status?.state ?? lastState;
        if (!listening) return;
        if (!results) {
          results = new ResultManager(store, context);
          results.setContext(params.message!);
        }
        const manager = results;
        const stops = stopsSdkQueue(event);
        if (stops) listening = false;
        chain = chain
          .then(() => manager.processEvent(event))
          .then(() => (stops ? settle(finalResult) : undefined), fail);
      };
      const onFinished = (): void => {
        if (!listening) return;
        listening = false;
        void chain.then(() => settle(finalResult));
      };
      bus.on('event', onEvent);
      bus.on('finished', onFinished);
      const answer: DirectAnswer = (result) => {
        if ('id' in result) lastState = result.status?.state;
        if (!listening || results) return;
        listening = false;
        this.answeredDirectly += 1;
        // Saved before the answer leaves (GetTask right after it finds the task); the executor gave
        // the task up, so the store keeps it as it is.
        if ('id' in result) chain = chain.then(() => store.adopt(result));
        void chain.then(() => settle(() => result), fail);
      };
      context.state.set(DIRECT_ANSWER_KEY, answer);
      void executor
        .execute(rc, bus)
        .catch((err: unknown) => publishExecutionFailure(bus, rc, err))
        .finally(() => {
          bus.off('event', onEvent);
          bus.off('finished', onFinished);
          // As the SDK settles a bus: its manager may take it over, else it closes unless the task waits.
          const kept =
            buses.settleByTaskId?.(taskId, bus, lastState, context) === true ||
            (lastState !== undefined && BUS_KEPT_IN.has(lastState));
          if (!kept) {
            bus.finished();
            buses.cleanupByTaskId(taskId, context);
          }
          onFinished();
        });
    });
  }
}

/**
 * The RequestContext of a new task over `request`, which this path made for it and nothing else
 * holds. The SDK's constructor deep-copies its request, against a caller that changes it later;
 * nothing does here, so the copy is left out.
 */
function ownedRequestContext(request: SendMessageRequest, context: ServerCallContext): RequestContext {
  const message = request.message!;
  const fields: Pick<RequestContext, 'request' | 'taskId' | 'contextId' | 'context'> = {
    request,
    taskId: message.taskId,
    contextId: message.contextId,
    context,
  };
  return Object.assign(Object.create(RequestContext.prototype) as RequestContext, fields);
}

/** The text of an executor's failure, as the SDK quotes it. */
function failureText(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'string') return err;
  if (err === null || err === undefined) return String(err);
  try {
    return JSON.stringify(err);
  } catch {
    return String(err);
  }
}

/**
 * An executor that throws ends its task failed, with the reason as its status message: the task,
 * then its status, on the bus (the SDK's `sendMessage` does the same, so both paths end alike).
 */
function publishExecutionFailure(bus: ExecutionEventBus, rc: RequestContext, err: unknown): void {
  console.error(`Agent execution failed for message ${rc.userMessage.messageId}:`, err);
  const contextId = rc.userMessage.contextId;
  const status = {
    state: TaskState.TASK_STATE_FAILED,
    message: {
      role: Role.ROLE_AGENT,
      messageId: randomUUID(),
      taskId: rc.taskId,
      contextId,
      parts: [
        {
          content: { $case: 'text' as const, value: `Agent execution error: ${failureText(err)}` },
          mediaType: 'text/plain',
          filename: '',
          metadata: {},
        },
      ],
      metadata: {},
      extensions: [],
      referenceTaskIds: [],
    },
    timestamp: new Date().toISOString(),
  };
  bus.publish(
    AgentEvent.task({
      id: rc.taskId,
      contextId,
      status,
      artifacts: [],
      history: [rc.userMessage],
      metadata: {},
    }),
  );
  bus.publish(AgentEvent.statusUpdate({ taskId: rc.taskId, contextId, status, metadata: {} }));
}
