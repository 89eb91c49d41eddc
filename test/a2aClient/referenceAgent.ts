/**
 * A reference A2A agent for tests: the official `@a2a-js/sdk` server (DefaultRequestHandler, the
 * Express JSON-RPC and REST handlers, the card handler) with a small AgentExecutor. What it answers
 * depends on the text, so one server covers the shapes a client must map:
 *   "direct: X"  → a Message (no task)
 *   "fail: X"    → task failed with status message X
 *   "input: X"   → task input-required
 *   "status: X"  → task completed with the answer only in its final status message
 *   "wait"       → task working until cancelled (then canceled)
 *   anything     → task: working (status message "thinking"), two artifact chunks
 *                  "ref:" + " <TEXT upper-cased>", completed
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { Role, TaskState, type AgentCard, type Message, type Part, type Task } from '@a2a-js/sdk';
import {
  DefaultRequestHandler,
  InMemoryTaskStore,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';

export interface ReferenceAgentOptions {
  name?: string;
  /** Interface protocol version in the card: '1.0' (default) or '0.3' (served through legacyCompat). */
  protocolVersion?: '1.0' | '0.3';
  /** Binding listed first (the one a client prefers): default JSONRPC. */
  preferred?: 'JSONRPC' | 'HTTP+JSON';
  streaming?: boolean;
  skills?: Array<{ id: string; name?: string; tags: string[] }>;
  /** Port to listen on (default: any free port). */
  port?: number;
  /** Overrides the card's interface URLs (to test the client's same-host rule); gets the base URL. */
  interfaceUrl?: (base: string, binding: 'jsonrpc' | 'rest') => string;
}

export interface ReferenceAgent {
  url: string;
  /** Every user message the executor received, in order. */
  received: Message[];
  /** Task ids the executor was asked to cancel. */
  cancelled: string[];
  close(): Promise<void>;
}

const textPart = (value: string): Part => ({
  content: { $case: 'text', value },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});

function agentMessage(text: string, contextId: string, taskId = ''): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

class ReferenceExecutor implements AgentExecutor {
  private readonly waiting = new Map<string, () => void>();
  constructor(private readonly agent: ReferenceAgent) {}

  execute = async (ctx: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const message = ctx.userMessage;
    this.agent.received.push(message);
    const text = message.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    const { taskId, contextId } = ctx;
    if (text.startsWith('direct: ')) {
      bus.publish({ kind: 'message', data: agentMessage(`direct answer to ${text.slice(8)}`, contextId) });
      bus.finished();
      return;
    }
    const status = (state: TaskState, msg?: string) =>
      bus.publish({
        kind: 'statusUpdate',
        data: {
          taskId,
          contextId,
          status: {
            state,
            message: msg === undefined ? undefined : agentMessage(msg, contextId, taskId),
            timestamp: new Date().toISOString(),
          },
          metadata: undefined,
        },
      });
    const task: Task = {
      id: taskId,
      contextId,
      status: {
        state: TaskState.TASK_STATE_SUBMITTED,
        message: undefined,
        timestamp: new Date().toISOString(),
      },
      artifacts: [],
      history: [message],
      metadata: undefined,
    };
    bus.publish({ kind: 'task', data: task });
    status(TaskState.TASK_STATE_WORKING, 'thinking');
    if (text.startsWith('fail: ')) status(TaskState.TASK_STATE_FAILED, text.slice(6));
    else if (text.startsWith('input: ')) status(TaskState.TASK_STATE_INPUT_REQUIRED, text.slice(7));
    else if (text.startsWith('status: '))
      status(TaskState.TASK_STATE_COMPLETED, `status answer ${text.slice(8)}`);
    else if (text === 'wait') {
      await new Promise<void>((resolve) => this.waiting.set(taskId, resolve));
      status(TaskState.TASK_STATE_CANCELED, 'stopped');
    } else {
      const artifactId = randomUUID();
      for (const [i, chunk] of ['ref:', ` ${text.toUpperCase()}`].entries())
        bus.publish({
          kind: 'artifactUpdate',
          data: {
            taskId,
            contextId,
            artifact: {
              artifactId,
              name: 'answer',
              description: '',
              parts: [textPart(chunk)],
              metadata: undefined,
              extensions: [],
            },
            append: i > 0,
            lastChunk: i === 1,
            metadata: undefined,
          },
        });
      status(TaskState.TASK_STATE_COMPLETED);
    }
    bus.finished();
  };

  cancelTask = async (taskId: string): Promise<void> => {
    this.agent.cancelled.push(taskId);
    this.waiting.get(taskId)?.();
    this.waiting.delete(taskId);
  };
}

/** Starts the reference agent on 127.0.0.1 (random port). */
export async function startReferenceAgent(options: ReferenceAgentOptions = {}): Promise<ReferenceAgent> {
  const app = express();
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(options.port ?? 0, '127.0.0.1', () => resolve(s));
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const version = options.protocolVersion ?? '1.0';
  const jsonrpc = {
    url: options.interfaceUrl?.(base, 'jsonrpc') ?? `${base}/a2a/jsonrpc`,
    protocolBinding: 'JSONRPC',
    tenant: '',
    protocolVersion: version,
  };
  const rest = {
    url: options.interfaceUrl?.(base, 'rest') ?? `${base}/a2a/rest`,
    protocolBinding: 'HTTP+JSON',
    tenant: '',
    protocolVersion: version,
  };
  const card: AgentCard = {
    name: options.name ?? 'Reference Agent',
    description: 'The @a2a-js/sdk server with a test executor',
    supportedInterfaces: options.preferred === 'HTTP+JSON' ? [rest, jsonrpc] : [jsonrpc, rest],
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: options.streaming ?? true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: (options.skills ?? [{ id: 'shout', name: 'Shout', tags: ['Upper Case', 'reference'] }]).map(
      (s) => ({
        id: s.id,
        name: s.name ?? s.id,
        description: `skill ${s.id}`,
        tags: s.tags,
        examples: [],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      }),
    ),
    signatures: [],
  };
  const agent: ReferenceAgent = {
    url: base,
    received: [],
    cancelled: [],
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new ReferenceExecutor(agent));
  const legacyCompat = { enabled: version === '0.3' };
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler, legacyCompat }));
  app.use(
    '/a2a/jsonrpc',
    jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat }),
  );
  app.use(
    '/a2a/rest',
    restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat }),
  );
  return agent;
}
