/**
 * The task service: everything a requester of mesh tasks does, as one narrow interface. The
 * protocol adapters (OpenAI, A2A, AMP, Fabric) and the operator routes take this, not the
 * Coordinator; the coordinator builds the one implementation over its dispatcher (requests waiting
 * for their answer), its lifecycle (the task table) and the follow-up input path, and exposes it as
 * `coordinator.tasks`.
 */
import type { AmfEventOf } from '../../events/cloudEvent.js';
import type { TaskDispatcher, SubmitRequest, TaskResult } from './dispatcher.js';
import { sendTaskInput, type TaskInputDeps, type TaskInputMessage } from './input.js';
import type { AnnounceRequest, TaskLifecycle, TaskRecord, TerminalInfo } from './lifecycle.js';
import { taskUpdates, type TaskStreamItem } from './updates.js';

// What a requester reads of its tasks comes from here, so it imports nothing else of the task path.
export type { TaskResult, TaskUpdate } from './dispatcher.js';
export { stoppingError } from './dispatcher.js';

/** Why a requester ends a task before its worker does. */
export type CancelReason = 'requester_timeout' | 'requester_cancelled' | 'task_cancelled';

/** A request whose updates are read from {@link TaskService.updates} instead of callbacks. */
export type UpdatesRequest = Omit<SubmitRequest, 'onUpdate' | 'onAnnounced'>;

/** What a requester of mesh tasks needs. */
export interface TaskService {
  /** Runs one task to its end: its result, or the error that ended it (TaskDispatcher.submit). */
  submit(req: SubmitRequest): Promise<TaskResult>;
  /**
   * Runs one task and yields its announcement, its updates and last its result; throws the error
   * that ended it. Leaving the loop early cancels the task (updates.ts).
   */
  updates(req: UpdatesRequest): AsyncIterable<TaskStreamItem>;
  /** Waits for the end of a task taken over here (adoptWaiting), as submit waits for its own. */
  follow(
    taskId: string,
    req: Pick<SubmitRequest, 'signal' | 'onUpdate'> & { attempt?: number },
  ): Promise<TaskResult>;
  /** The requester of a waiting task went away: the task is cancelled. False when none waits here. */
  abandon(taskId: string): boolean;
  /** Hands a follow-up message to the worker holding a task that waits for input (input.ts). */
  sendInput(taskId: string, message: TaskInputMessage): void;
  /** A task this coordinator follows, as its lifecycle records it. */
  get(taskId: string): Readonly<TaskRecord> | undefined;
  /** Announces a task nobody here waits for (the operator's `/publish`). */
  announce(req: AnnounceRequest): Readonly<TaskRecord>;
  /** Ends a task on its requester's behalf; false when it is not running here. */
  cancel(taskId: string, reason: CancelReason, message: string): boolean;
  /** Lets a task outlive a stop while it waits for its requester's input (or undoes that). */
  keepWhileWaiting(taskId: string, keep: boolean): void;
  /** Takes over a task an earlier run left waiting for input; undefined when it is followed already. */
  adoptWaiting(
    announce: AmfEventOf<'amf.task.announce'>,
    claimedBy: string,
    attempt: number,
  ): Readonly<TaskRecord> | undefined;
  /** Tasks in flight. */
  readonly activeCount: number;
  /** Called with every task that reaches a terminal state; returns the unsubscribe. */
  onTerminal(listener: (info: TerminalInfo) => void): () => void;
  /** The stop: every request still waiting is answered UNAVAILABLE and its task cancelled. */
  endForStop(): void;
}

/** What the mesh's task service is built on. */
export interface MeshTaskServiceParts {
  dispatcher: TaskDispatcher;
  lifecycle: TaskLifecycle;
  /** The follow-up path (the bus, the coordinator's sender, the holder's bound key). */
  input: Omit<TaskInputDeps, 'lifecycle'>;
}

/** The task service over the coordinator's dispatcher and lifecycle. */
export class MeshTaskService implements TaskService {
  private readonly dispatcher: TaskDispatcher;
  private readonly lifecycle: TaskLifecycle;
  private readonly inputDeps: TaskInputDeps;

  constructor(parts: MeshTaskServiceParts) {
    this.dispatcher = parts.dispatcher;
    this.lifecycle = parts.lifecycle;
    this.inputDeps = { ...parts.input, lifecycle: parts.lifecycle };
  }

  submit(req: SubmitRequest): Promise<TaskResult> {
    return this.dispatcher.submit(req);
  }

  updates(req: UpdatesRequest): AsyncIterable<TaskStreamItem> {
    return taskUpdates(
      (hooks) => this.dispatcher.submit({ ...req, ...hooks }),
      (taskId) => this.dispatcher.abandon(taskId),
    );
  }

  follow(
    taskId: string,
    req: Pick<SubmitRequest, 'signal' | 'onUpdate'> & { attempt?: number },
  ): Promise<TaskResult> {
    return this.dispatcher.follow(taskId, req);
  }

  abandon(taskId: string): boolean {
    return this.dispatcher.abandon(taskId);
  }

  sendInput(taskId: string, message: TaskInputMessage): void {
    sendTaskInput(this.inputDeps, taskId, message);
  }

  get(taskId: string): Readonly<TaskRecord> | undefined {
    return this.lifecycle.get(taskId);
  }

  announce(req: AnnounceRequest): Readonly<TaskRecord> {
    return this.lifecycle.announce(req);
  }

  cancel(taskId: string, reason: CancelReason, message: string): boolean {
    return this.lifecycle.cancel(taskId, reason, message);
  }

  keepWhileWaiting(taskId: string, keep: boolean): void {
    this.lifecycle.keepWhileWaiting(taskId, keep);
  }

  adoptWaiting(
    announce: AmfEventOf<'amf.task.announce'>,
    claimedBy: string,
    attempt: number,
  ): Readonly<TaskRecord> | undefined {
    return this.lifecycle.adoptWaiting(announce, claimedBy, attempt);
  }

  get activeCount(): number {
    return this.lifecycle.activeCount;
  }

  onTerminal(listener: (info: TerminalInfo) => void): () => void {
    return this.lifecycle.onTerminal(listener);
  }

  endForStop(): void {
    this.dispatcher.endForStop();
  }
}
