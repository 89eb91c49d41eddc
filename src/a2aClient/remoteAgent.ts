/**
 * A remote A2A agent as AMF talks to it: its card fetched once under our guards, an SDK client over
 * the interface the card prefers (JSON-RPC or HTTP+JSON, protocol 1.0 or 0.3 through the SDK's
 * compatibility layer), and `send` / `stream` that return replies in one shape. Every request goes
 * through the guarded fetch (same host as the card, metadata hosts refused, bodies capped).
 */
import { randomUUID } from 'node:crypto';
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';
import { Role, type AgentCard, type AgentSkill, type Message, type SendMessageRequest } from '@a2a-js/sdk';
import { A2AError } from '@a2a-js/sdk/errors';
import { AmfError } from '../errors.js';
import { cardSkills, fetchAgentCard, type CardFetchOptions } from './agentCard.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import { createGuardedFetch } from '../net/guardedFetch.js';
import { provenPeerBearer } from './peerBearer.js';
import {
  isFinalState,
  replyFromResult,
  replyFromTask,
  StreamCollector,
  type A2aReply,
  type StreamStep,
} from './replyMapping.js';

/** Time one message may take end to end unless the caller says otherwise. */
export const DEFAULT_SEND_TIMEOUT_MS = 120_000;

/** Largest JSON response (one JSON-RPC or REST body) accepted from a remote agent. */
export const MAX_A2A_RESPONSE_BYTES = 10 * 1024 * 1024;

/** Largest task text we send (the remote agent has its own limits; this keeps ours). */
export const MAX_SEND_TEXT_BYTES = 1024 * 1024;

export interface ConnectOptions extends CardFetchOptions {
  /** Name in errors and logs (default: the card's name). */
  name?: string;
  /**
   * The caller's identity: under SPIFFE, every call after the card carries a JWT-SVID bearer for
   * the SPIFFE ID the card names, once the agent proved it (peerBearer.ts).
   */
  identity?: IdentityProvider;
}

export interface SendOptions {
  signal?: AbortSignal;
  /** Default `DEFAULT_SEND_TIMEOUT_MS`. */
  timeoutMs?: number;
  /** Message metadata (e.g. `{tag}` for an AMF coordinator, the AMF trace id). */
  metadata?: Record<string, unknown>;
  contextId?: string;
}

/** One step of a streamed reply; the last one carries the whole reply. */
export type StreamUpdate = StreamStep & { reply?: A2aReply };

function textMessage(text: string, options: SendOptions): SendMessageRequest {
  if (Buffer.byteLength(text) > MAX_SEND_TEXT_BYTES)
    throw new AmfError('PAYLOAD_TOO_LARGE', `message text exceeds ${MAX_SEND_TEXT_BYTES} bytes`);
  const message: Message = {
    messageId: randomUUID(),
    contextId: options.contextId ?? '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: options.metadata,
    extensions: [],
    referenceTaskIds: [],
  };
  return { tenant: '', message, configuration: undefined, metadata: undefined };
}

function deadline(options: SendOptions): { signal: AbortSignal; timedOut: () => boolean; ms: number } {
  const ms = options.timeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
  const timeout = AbortSignal.timeout(ms);
  return {
    signal: options.signal ? AbortSignal.any([timeout, options.signal]) : timeout,
    timedOut: () => timeout.aborted,
    ms,
  };
}

/** A connected remote A2A agent. */
export class RemoteA2aAgent {
  private constructor(
    readonly name: string,
    readonly card: AgentCard,
    readonly cardUrl: string,
    private readonly client: Client,
  ) {}

  /** Fetches the card at `url` and builds a client for the interface it prefers. */
  static async connect(url: string, options: ConnectOptions = {}): Promise<RemoteA2aAgent> {
    const fetched = await fetchAgentCard(url, options);
    const name = options.name ?? fetched.card.name.slice(0, 64);
    // Every call goes only to the host the card came from (a card chooses its interface URLs),
    // redirects refused, JSON bodies read under the cap; SSE passes (the SDK bounds each event).
    const guarded = createGuardedFetch({
      what: `A2A agent "${name}"`,
      host: new URL(fetched.cardUrl).hostname,
      hostRole: 'the host its card came from',
      redirects: 'refuse',
      maxBytes: MAX_A2A_RESPONSE_BYTES,
      streamCap: 'none',
      buffer: true,
      ...(options.headers ? { headers: options.headers } : {}),
    }) as typeof fetch;
    const bearer = await provenPeerBearer(options.identity, fetched, name);
    const fetchImpl: typeof fetch = bearer
      ? async (input, init) => {
          const headers = new Headers(init?.headers);
          for (const [k, v] of Object.entries(await bearer())) headers.set(k, v);
          return guarded(input, { ...init, headers });
        }
      : guarded;
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [
          new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }),
          new RestTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }),
        ],
      }),
    );
    let client: Client;
    try {
      client = await factory.createFromAgentCard(fetched.card);
    } catch (err) {
      throw new AmfError(
        'INVALID_REQUEST',
        `A2A agent "${name}": no interface we speak (JSON-RPC or HTTP+JSON): ${(err as Error).message}`,
      );
    }
    return new RemoteA2aAgent(name, fetched.card, fetched.cardUrl, client);
  }

  /** The card's skills with an id. */
  get skills(): AgentSkill[] {
    return cardSkills(this.card);
  }

  /** The protocol version the client speaks with this agent (`1.0` or `0.3`). */
  get protocolVersion(): string {
    return this.client.protocolVersion;
  }

  /** The wire binding in use (`JSONRPC` or `HTTP+JSON`). */
  get protocolBinding(): string {
    return this.client.transport.protocolName;
  }

  /**
   * Sends `text` and waits for the answer (blocking send). A task that comes back still at work is
   * polled until it ends, the deadline passes, or the caller aborts (then it is cancelled remotely).
   */
  async send(text: string, options: SendOptions = {}): Promise<A2aReply> {
    const request = textMessage(text, options);
    const d = deadline(options);
    let reply: A2aReply;
    let taskId: string | undefined;
    try {
      reply = replyFromResult(await this.client.sendMessage(request, { signal: d.signal }));
      taskId = reply.taskId;
      for (
        let wait = 200;
        reply.kind === 'task' && !isFinalState(reply.state);
        wait = Math.min(wait * 2, 2000)
      ) {
        await new Promise((resolve) => setTimeout(resolve, wait));
        d.signal.throwIfAborted();
        reply = replyFromTask(await this.client.getTask({ tenant: '', id: taskId! }, { signal: d.signal }));
      }
      return reply;
    } catch (err) {
      if (d.signal.aborted && taskId) this.cancelQuietly(taskId);
      throw this.wrap(err, d);
    }
  }

  /** Sends `text` as a streaming message; yields steps, the last with the whole reply. */
  async *stream(text: string, options: SendOptions = {}): AsyncGenerator<StreamUpdate, void, undefined> {
    const request = textMessage(text, options);
    const d = deadline(options);
    const collector = new StreamCollector();
    try {
      for await (const event of this.client.sendMessageStream(request, { signal: d.signal })) {
        const step = collector.accept(event);
        if (collector.done) {
          yield { ...step, reply: collector.reply() };
          return;
        }
        yield step;
      }
    } catch (err) {
      const taskId = collector.reply().taskId;
      if (d.signal.aborted && taskId) this.cancelQuietly(taskId);
      throw this.wrap(err, d);
    }
    // The stream closed without a final state: say what we have, honestly labelled.
    yield { state: collector.reply().state, reply: collector.reply() };
  }

  /** Asks the remote agent to cancel a task; failures are ignored (the task may have ended). */
  cancelQuietly(taskId: string): void {
    this.client
      .cancelTask({ tenant: '', id: taskId, metadata: undefined }, { signal: AbortSignal.timeout(5000) })
      .catch(() => undefined);
  }

  private wrap(err: unknown, d: { timedOut: () => boolean; ms: number }): AmfError {
    if (err instanceof AmfError) return err;
    if (d.timedOut())
      return new AmfError('TIMEOUT', `A2A agent "${this.name}" gave no answer within ${d.ms} ms`);
    const e = err as Error & { cause?: { code?: string; message?: string } };
    if (e.name === 'AbortError')
      return new AmfError('UNAVAILABLE', `request to A2A agent "${this.name}" was cancelled`);
    // An A2A error (JSON-RPC code or REST status) is an answer, not an outage.
    if (err instanceof A2AError)
      return new AmfError(
        'TASK_FAILED',
        `A2A agent "${this.name}" answered ${err.reason}: ${err.message}`,
        undefined,
        { cause: err },
      );
    const cause = e.cause?.code ?? e.cause?.message;
    const detail = cause ? `${e.message} (${cause})` : e.message;
    return new AmfError('UNAVAILABLE', `A2A agent "${this.name}": ${detail}`);
  }
}
