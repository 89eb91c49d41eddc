/**
 * The callers of one session of a worker's `/mcp`, as re-exported servers see them
 * (worker/reexportMcp.ts): the session itself, and each caller the coordinator names in `_meta`
 * (`amf/caller`) on its link, which carries the requests of many of its own callers. A named
 * caller is the same caller in whichever session it comes (the name is an unguessable id the
 * coordinator gives each session of its own `/mcp`); an unnamed one is its session. The callers a
 * session keeps are bounded, the least recently seen forgotten first.
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CreateMessageResultSchema,
  CreateMessageResultWithToolsSchema,
  ElicitResultSchema,
  ListRootsResultSchema,
  ResultSchema,
  type ClientCapabilities,
  type Result,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { McpCallerSession, McpSessionScope } from '../../worker/reexportMcp.js';

/**
 * The `_meta` key under which the coordinator names the caller behind a request it forwards on its
 * shared link to an agent: an opaque name per caller session of the coordinator's own `/mcp`.
 */
export const CALLER_META_KEY = 'amf/caller';

/** Most callers one session names (the coordinator's link names one per caller session of its own). */
const MAX_CALLERS_PER_SESSION = 256;
/** Longest caller name taken from `_meta`. */
const MAX_CALLER_NAME = 128;

class Caller implements McpCallerSession {
  private readonly listeners: Array<() => void> = [];
  private ended = false;

  constructor(
    readonly key: string,
    readonly named: boolean,
    readonly session: McpSessionScope,
    readonly capabilities: ClientCapabilities,
    private readonly server: Server,
  ) {}

  notify(notification: Parameters<Server['notification']>[0]): Promise<void> {
    return this.server.notification(notification);
  }

  ask(request: ServerRequest, signal: AbortSignal): Promise<Result> {
    const schema =
      request.method === 'sampling/createMessage'
        ? request.params.tools || request.params.toolChoice
          ? CreateMessageResultWithToolsSchema
          : CreateMessageResultSchema
        : request.method === 'elicitation/create'
          ? ElicitResultSchema
          : request.method === 'roots/list'
            ? ListRootsResultSchema
            : ResultSchema;
    return this.server.request(request, schema, { signal });
  }

  onClose(listener: () => void): void {
    if (this.ended) listener();
    else this.listeners.push(listener);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    for (const listener of this.listeners.splice(0)) listener();
  }
}

/** The callers of one worker session (one SDK server); the session's scope for them. */
export class WorkerCallers implements McpSessionScope {
  private readonly callers = new Map<string, Caller>();
  private readonly listeners: Array<() => void> = [];
  private ended = false;
  id = '';

  constructor(private readonly server: Server) {}

  onClose(listener: () => void): void {
    if (this.ended) listener();
    else this.listeners.push(listener);
  }

  /** The caller of a request of session `sessionId` whose params carry `meta`. */
  of(sessionId: string | undefined, meta: Record<string, unknown> | undefined): McpCallerSession | undefined {
    if (sessionId === undefined || this.ended) return undefined;
    this.id = sessionId;
    const name = meta?.[CALLER_META_KEY];
    const named = typeof name === 'string' && name !== '';
    // A named caller is the same caller whichever session it comes in: the coordinator reaches an
    // agent over its shared link and over connections of a caller's own, which end when idle.
    const key = named ? `${CALLER_META_KEY}:${name.slice(0, MAX_CALLER_NAME)}` : sessionId;
    let caller = this.callers.get(key);
    if (caller) {
      // Most recently seen last: the first in the map is the one to forget.
      this.callers.delete(key);
    } else {
      caller = new Caller(key, named, this, this.server.getClientCapabilities() ?? {}, this.server);
      if (this.callers.size >= MAX_CALLERS_PER_SESSION) {
        const [oldestKey, oldest] = this.callers.entries().next().value!;
        this.callers.delete(oldestKey);
        oldest.end();
      }
    }
    this.callers.set(key, caller);
    return caller;
  }

  /** The session ended: so did its callers. */
  close(): void {
    if (this.ended) return;
    this.ended = true;
    for (const caller of this.callers.values()) caller.end();
    this.callers.clear();
    for (const listener of this.listeners.splice(0)) listener();
  }
}
