/**
 * What a MeshWorker is built from (its options) and what each task run is given: shared by the
 * worker, its HTTP, A2A and MCP faces, and the result submission.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { AgentKey } from '../identity/agentKey.js';
import type { LogFn } from '../log.js';
import type { TaskContext, TaskTools, WorkerHandler } from './handlerApi.js';
import type { HandlerTimeouts } from './handlerTimeout.js';

export interface MeshWorkerOptions {
  name: string;
  tags: string[];
  trustDomain: string;
  /** Base URL where this worker's HTTP endpoints are reachable. */
  endpoint: string;
  handler: WorkerHandler;
  heartbeatSeconds: number;
  concurrency: number;
  version?: string;
  /** Extra protocols announced in the AgentRecord (e.g. MCP). */
  protocols?: string[];
  /** The agent id (under SPIFFE: the SVID's SPIFFE ID); default `spiffe://<trust>/worker/<name>`. */
  agentId?: string;
  /** Advertised visibility (default local; mesh/public need a proven SPIFFE SVID at admission). */
  visibility?: 'local' | 'mesh' | 'public';
  mcpEndpoint?: string;
  /** Gives each task its `ctx.tools` (the worker's MCP servers), bound to the task's signal. */
  tools?: (signal: AbortSignal) => TaskTools;
  log?: LogFn;
  /**
   * The agent's own key: advertised as `nkey` and signing every event this worker sends, so the
   * coordinator accepts them only as this agent's (default: a key for this process only).
   */
  key?: AgentKey;
  /**
   * How long a handler may run (default {@link DEFAULT_HANDLER_TIMEOUT_SECONDS}, or per tag): past
   * it, the attempt ends (its signal is aborted and the task is retried on another worker); a
   * handler that ignores the abort keeps its slot until it settles (handlerTimeout.ts).
   */
  handlerTimeouts?: HandlerTimeouts;
  /**
   * Where heartbeats go when not on the main connection: the join connection of an agent that
   * connects as its own NATS user. Its user exists only while the agent is admitted, so its
   * heartbeats must travel on a connection that outlives a revocation (or a restarted server) to
   * get it admitted again.
   */
  heartbeatConnection?: NatsConnection;
  /**
   * The coordinator's public key (identity/coordinatorKey.ts): cancellations, denials and follow-ups
   * count only when signed with it (coordinatorOrders.ts). Absent: the sender's role is checked only.
   */
  coordinatorKey?: string;
  /**
   * The worker's NATS connection is its key's own user (it joined, or its key was enrolled): its
   * task events and stored results go on the subjects named after its key, which the coordinators
   * check and record (coordinator/tasks/eventIntake.ts). Absent: the shared subjects, for a worker
   * logged in as the legacy `specialist` user (seed mode).
   */
  ownSubjects?: boolean;
}

/** A task as it reaches the worker; the worker adds the signal, progress, delegate, tools and input. */
export type TaskInput = Omit<TaskContext, 'signal' | 'progress' | 'delegate' | 'tools' | 'requestInput'>;

/** How one task is run: every way a task arrives goes through `MeshWorker.run` with these. */
export interface RunTaskOptions {
  /**
   * `mesh`: announced by a coordinator, which ends the task itself when it is cancelled or expires.
   * `direct`: A2A, `POST /tasks/send` or an MCP tool call; this worker publishes its one ending.
   */
  origin: 'mesh' | 'direct';
  /** The caller's cancellation (client gone, A2A cancel, MCP request aborted). */
  signal?: AbortSignal;
  /** The coordinator's reply subject for this task (mesh tasks only, already checked). */
  replySubject?: string;
  /**
   * The offer nonce of the work-queue message this mesh task came in (fabric/workQueue.ts), echoed in
   * its claims and final: the coordinator counts a claim only for an offer its claimant received.
   */
  offer?: string;
  /** Receives each streamed chunk (also published as `amf.result.partial`). */
  onChunk?: (delta: string) => void;
  /** Receives each progress message (also published as `amf.task.progress`). */
  onProgress?: (message: string) => void;
  /**
   * The handler asked for input (`ctx.requestInput`): a direct task's caller shows it (A2A
   * input-required) and delivers the follow-up with `MeshWorker.provideInput`. Without it a direct
   * task cannot take input; mesh tasks get theirs from the coordinator (`amf.task.input`).
   */
  onInputRequired?: (prompt: string) => void;
}
