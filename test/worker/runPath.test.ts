/**
 * The worker's one run path: an MCP tool call, a `POST /tasks/send` and an A2A-style direct run share
 * the same concurrency slots, the same drain and the same claim/final events on NATS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import type { AmfEvent } from '../../src/events/cloudEvent.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { TaskSlots } from '../../src/worker/taskSlots.js';

/** The key the worker's owner holds: `/tasks/send` takes it (edge/worker/workerEdgeGate.ts). */
const OPERATOR_KEY = 'run-path-test-operator-key';
let nats: TestNats;
let running: RunningWorker;
const seen: Array<{ type: string; taskId: string | undefined }> = [];
let active = 0;
let maxActive = 0;
const gates: Array<() => void> = [];

/** Holds each call until the test opens its gate, counting how many run at once. */
const gated: WorkerHandler = {
  name: 'gated',
  description: 'Waits for the test, then echoes',
  async handle(ctx) {
    active++;
    maxActive = Math.max(maxActive, active);
    await new Promise<void>((resolve) => gates.push(resolve));
    active--;
    return ctx.text;
  },
};

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  nats = await startTestNats();
  const observer = new EventBus(await nats.connect('coordinator'));
  for (const subject of ['amf.task.claim', 'amf.result.final'])
    observer.subscribe(subject, (e: AmfEvent) => seen.push({ type: e.type, taskId: e.amftaskid }));
  await observer.flush();
  running = await startWorker({
    name: 'gated',
    tags: ['gated'],
    handler: gated,
    natsUrl: nats.url,
    credential: nats.credentials.specialist,
    port: 0,
    concurrency: 1,
    heartbeatSeconds: 60,
    operatorKey: OPERATOR_KEY,
  });
});

afterAll(async () => {
  await running?.close(0);
  await nats?.close();
});

describe('one run path for every way a task arrives', () => {
  it('an MCP tool call and a /tasks/send call share one slot and both publish claim and final', async () => {
    const mcp = new Client({ name: 'run-path-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${running.url}/mcp`)));
    const viaMcp = mcp.callTool({ name: 'gated', arguments: { text: 'from mcp' } });
    await until(() => active === 1, 'the MCP call to start');
    const viaHttp = fetch(`${running.url}/tasks/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_KEY}` },
      body: JSON.stringify({ text: 'from http' }),
    });
    // Concurrency 1: the second call waits for the slot instead of running beside the first.
    await until(() => seen.filter((e) => e.type === 'amf.task.claim').length === 2, 'both claims');
    expect(active).toBe(1);
    gates.shift()!();
    await until(() => gates.length === 1, 'the second call to start');
    gates.shift()!();
    const [mcpResult, httpResponse] = await Promise.all([viaMcp, viaHttp]);
    await mcp.close();
    expect(mcpResult.content).toEqual([{ type: 'text', text: 'from mcp' }]);
    expect(((await httpResponse.json()) as { result: { text: string } }).result.text).toBe('from http');
    expect(maxActive).toBe(1);
    await until(() => seen.filter((e) => e.type === 'amf.result.final').length === 2, 'both finals');
    const claimed = seen.filter((e) => e.type === 'amf.task.claim').map((e) => e.taskId);
    const ended = seen.filter((e) => e.type === 'amf.result.final').map((e) => e.taskId);
    expect(new Set(ended)).toEqual(new Set(claimed));
  });

  it('a draining worker refuses a direct task with code draining and publishes nothing for it', async () => {
    const before = seen.length;
    const drained = running.worker.drain(5_000);
    const outcome = await running.worker.run(
      {
        taskId: '0b5c3a1e-8a55-4d47-9a56-3f0f3c1b2a10',
        traceId: '0b5c3a1e-8a55-4d47-9a56-3f0f3c1b2a10',
        tag: 'gated',
        text: 'late',
        messages: [{ role: 'user', content: 'late' }],
        stream: false,
        attempt: 1,
      },
      { origin: 'direct' },
    );
    await drained;
    expect(outcome).toMatchObject({ ok: false, code: 'draining' });
    expect(seen.slice(before).filter((e) => e.taskId === '0b5c3a1e-8a55-4d47-9a56-3f0f3c1b2a10')).toEqual([]);
  });
});

describe('TaskSlots', () => {
  it('runs at most `capacity` at once and hands slots over in arrival order', async () => {
    const slots = new TaskSlots(2);
    const order: number[] = [];
    const releases: Array<() => void> = [];
    const jobs = [0, 1, 2, 3].map((i) =>
      slots.run(async () => {
        order.push(i);
        await new Promise<void>((resolve) => releases.push(resolve));
      }),
    );
    await new Promise((r) => setTimeout(r, 0));
    expect(order).toEqual([0, 1]);
    expect(slots.busy).toBe(2);
    expect(slots.hasFree).toBe(false);
    releases[1]!();
    await until(() => order.length === 3, 'the third job');
    expect(order).toEqual([0, 1, 2]);
    releases[0]!();
    releases[2]!();
    await until(() => order.length === 4, 'the fourth job');
    releases[3]!();
    await Promise.all(jobs);
    expect(slots.busy).toBe(0);
    expect(slots.hasFree).toBe(true);
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new TaskSlots(0)).toThrow(RangeError);
  });
});
