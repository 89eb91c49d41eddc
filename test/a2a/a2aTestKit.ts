/**
 * Helpers for the A2A tests: SDK-shaped requests built from plain JSON (the SDK's own fromJSON), text
 * of artifacts, and handlers a test can hold open and watch being aborted.
 */
import { randomUUID } from 'node:crypto';
import { SendMessageRequest, type Task } from '@a2a-js/sdk';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';

/** A SendMessage request for `text`, with message metadata and configuration as given. */
export function textMessage(
  text: string,
  opts: { metadata?: Record<string, unknown>; contextId?: string; returnImmediately?: boolean } = {},
): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: {
      messageId: randomUUID(),
      role: 'ROLE_USER',
      parts: [{ text }],
      ...(opts.metadata ? { metadata: opts.metadata } : {}),
      ...(opts.contextId ? { contextId: opts.contextId } : {}),
    },
    ...(opts.returnImmediately ? { configuration: { returnImmediately: true } } : {}),
  });
}

/** Concatenated text parts of a task's artifacts. */
export function artifactText(task: Task): string {
  return (task.artifacts ?? [])
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .join('');
}

/**
 * A handler that waits until released or aborted, so a test can cancel or subscribe to a running task.
 * `started` resolves with the task id once the handler runs; `aborted` with the abort reason.
 */
export function holdingHandler(description = 'Holds a task until the test releases it') {
  let release!: (text: string) => void;
  const released = new Promise<string>((r) => (release = r));
  let started!: (taskId: string) => void;
  const startedP = new Promise<string>((r) => (started = r));
  let aborted!: (taskId: string) => void;
  const abortedP = new Promise<string>((r) => (aborted = r));
  const handler: WorkerHandler = {
    name: 'hold',
    description,
    handle: (ctx) =>
      new Promise<string>((resolve, reject) => {
        started(ctx.taskId);
        ctx.signal.addEventListener('abort', () => {
          aborted(ctx.taskId);
          reject(new Error('aborted'));
        });
        void released.then((text) => resolve(`${text}:${ctx.text}`));
      }),
  };
  return { handler, release, started: startedP, aborted: abortedP };
}
