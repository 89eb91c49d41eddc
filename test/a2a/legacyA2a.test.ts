/**
 * A2A 0.3 clients through the SDK's compatibility layer: the SDK's 0.3 JSON-RPC and REST transports,
 * and raw 0.3 wire requests (`message/send` with `kind` parts, lowercase states), against the
 * coordinator (into the mesh) and a worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentCard, TaskState, type Task } from '@a2a-js/sdk';
import { Client } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport, LegacyRestTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { artifactText, textMessage } from './a2aTestKit.js';

let mesh: TestMesh;
let worker: RunningWorker;

beforeAll(async () => {
  mesh = await startTestMesh();
  worker = await mesh.startWorker('echo-legacy', ['echo'], echoHandler);
}, 60_000);

afterAll(async () => {
  await mesh?.close();
});

async function card(base: string): Promise<AgentCard> {
  return AgentCard.fromJSON(await (await fetch(`${base}/.well-known/agent-card.json`)).json());
}

describe('A2A 0.3 clients (SDK compat transports)', () => {
  it('JSON-RPC 0.3 message/send into the mesh, then tasks/get', async () => {
    const client = new Client(
      new LegacyJsonRpcTransport({ endpoint: `${mesh.url}/a2a` }),
      await card(mesh.url),
    );
    expect(client.protocolVersion).toBe('0.3');
    const task = (await client.sendMessage(
      textMessage('legacy hello', { metadata: { tag: 'echo' } }),
    )) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(task)).toBe('legacy hello');
    const got = await client.getTask({ tenant: '', id: task.id });
    expect(artifactText(got)).toBe('legacy hello');
  });

  it('REST 0.3 (/v1/message:send under the HTTP+JSON base) against a worker', async () => {
    const client = new Client(
      new LegacyRestTransport({ endpoint: `${worker.url}/a2a/rest` }),
      await card(worker.url),
    );
    const task = (await client.sendMessage(textMessage('legacy rest'))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(task)).toBe('legacy rest');
  });

  it('0.3 streaming (message/stream) ends in the completed state', async () => {
    const client = new Client(
      new LegacyJsonRpcTransport({ endpoint: `${mesh.url}/a2a` }),
      await card(mesh.url),
    );
    const states: TaskState[] = [];
    for await (const e of client.sendMessageStream(textMessage('a b', { metadata: { tag: 'echo' } })))
      if (e.payload?.$case === 'statusUpdate' && e.payload.value.status)
        states.push(e.payload.value.status.state);
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
  });
});

describe('A2A 0.3 on the wire', () => {
  it('a request without A2A-Version is 0.3: kind parts in, kind task with lowercase state out', async () => {
    const res = await fetch(`${mesh.url}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'r1',
        method: 'message/send',
        params: {
          message: {
            kind: 'message',
            messageId: crypto.randomUUID(),
            role: 'user',
            parts: [{ kind: 'text', text: 'wire 0.3' }],
            metadata: { tag: 'echo' },
          },
        },
      }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      id: string;
      result: {
        kind: string;
        status: { state: string };
        artifacts: Array<{ parts: Array<{ kind: string; text: string }> }>;
      };
    };
    expect(body.id).toBe('r1');
    expect(body.result.kind).toBe('task');
    expect(body.result.status.state).toBe('completed');
    expect(body.result.artifacts[0]!.parts[0]).toMatchObject({ kind: 'text', text: 'wire 0.3' });
  });

  it('a 0.3 error keeps the 0.3 codes (tasks/get of an unknown task: -32001)', async () => {
    const res = await fetch(`${mesh.url}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tasks/get',
        params: { id: crypto.randomUUID() },
      }),
    });
    expect(await res.json()).toMatchObject({ jsonrpc: '2.0', id: 2, error: { code: -32001 } });
  });
});
