// The coordinator endpoints behind the console (docs/console.md) and the CLI commands that use
// them, against a real mesh with an API key: history from JetStream, admission decisions, the tool
// catalog, one agent, forgetting an offline agent, approving only a pending one; and what the CLI
// says when nothing answers.
import { execFile } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { kvKey } from '../../src/fabric/jetstream.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const KEY = 'endpoints-key';
const AMF_BIN = join(fileURLToPath(new URL('../../', import.meta.url)), 'bin/amf.js');

function amf(
  args: string[],
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...extraEnv };
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AMF_')) env[k] = v;
  return new Promise((resolve) => {
    execFile(process.execPath, [AMF_BIN, ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

describe('console endpoints', () => {
  let mesh: TestMesh;
  const auth = { authorization: `Bearer ${KEY}` };
  const get = async (path: string, headers: Record<string, string> = auth) => {
    const res = await fetch(`${mesh.url}${path}`, { headers });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { coordinator: { apiKey: KEY } } });
    await mesh.startWorker('hist-echo', ['echo'], echoHandler);
    const res = await fetch(`${mesh.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: 'kept in history' }] }),
    });
    expect(res.status).toBe(200);
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('GET /events/history replays the stream oldest first, filtered by subject and task, bounded', async () => {
    const final = await mesh.waitForEvent((e) => e.subject === 'amf.result.final');
    const taskId = final.event.amftaskid!;
    const all = await get('/events/history?limit=1000');
    expect(all.status).toBe(200);
    const events = all.body.events as Array<{ seq: number; subject: string; event: { type: string } }>;
    expect(events.map((e) => e.seq)).toEqual([...events.map((e) => e.seq)].sort((a, b) => a - b));
    expect(events.some((e) => e.subject === 'amf.discovery.capability.advertise')).toBe(true);
    const task = await get(`/events/history?task=${taskId}&subject=amf.>`);
    const types = (task.body.events as typeof events).map((e) => e.event.type);
    expect(types[0]).toBe('amf.task.announce');
    expect(types).toContain('amf.task.claim');
    expect(types.at(-1)).toBe('amf.result.final');
    const finals = await get('/events/history?subject=amf.result.final&limit=1');
    expect((finals.body.events as typeof events).map((e) => e.subject)).toEqual(['amf.result.final']);

    expect((await get('/events/history?limit=0')).status).toBe(400);
    expect((await get('/events/history?limit=1001')).status).toBe(400);
    expect((await get('/events/history?subject=amf.internal.raw')).status).toBe(400);
    expect((await get('/events/history?subject=foo.>')).status).toBe(400);
    expect((await get('/events/history', {})).status).toBe(401);
  });

  it('GET /tasks lists the stored tasks newest first, filtered and bounded', async () => {
    const final = await mesh.waitForEvent((e) => e.subject === 'amf.result.final');
    const taskId = final.event.amftaskid!;
    type Listed = { task_id: string; state: string; tag: string; claimed_by?: string; trace_id: string };
    const listed = async (query: string) => {
      const { status, body } = await get(`/tasks${query}`);
      expect(status).toBe(200);
      return body.tasks as Listed[];
    };
    // The KV write is coalesced: wait until the completed state is stored.
    await expect
      .poll(async () => (await listed('')).find((t) => t.task_id === taskId)?.state, { timeout: 10_000 })
      .toBe('completed');
    const task = (await listed('')).find((t) => t.task_id === taskId)!;
    expect(task).toMatchObject({ tag: 'echo', claimed_by: 'spiffe://local/worker/hist-echo' });
    expect((await listed('?state=completed&tag=echo')).map((t) => t.task_id)).toContain(taskId);
    expect(await listed('?state=failed')).toEqual([]);
    expect(await listed('?tag=nothing-here')).toEqual([]);
    expect(
      (await listed(`?agent=${encodeURIComponent('spiffe://local/worker/hist-echo')}`)).map((t) => t.task_id),
    ).toContain(taskId);
    expect((await listed(`?trace=${task.trace_id}`)).map((t) => t.task_id)).toEqual([taskId]);
    expect((await listed(`?trace=${taskId.slice(0, 8)}&limit=1`)).map((t) => t.task_id)).toEqual([taskId]);

    expect((await get('/tasks?state=done')).status).toBe(400);
    expect((await get('/tasks?tag=Not A Tag')).status).toBe(400);
    expect((await get('/tasks?limit=0')).status).toBe(400);
    expect((await get('/tasks?limit=501')).status).toBe(400);
    expect((await get(`/tasks?agent=${'x'.repeat(513)}`)).status).toBe(400);
    expect((await get('/tasks', {})).status).toBe(401);
  });

  it('GET /admissions joins the watcher score with the decision; GET /tools and /agents/<id> describe agents', async () => {
    const { body } = await get('/admissions');
    const decisions = body.decisions as Array<Record<string, unknown>>;
    expect(decisions).toContainEqual(
      expect.objectContaining({
        agent_id: 'spiffe://local/worker/hist-echo',
        decision: 'admitted',
        risk_score: 0,
        status: 'live',
      }),
    );
    expect((await get('/admissions?limit=501')).status).toBe(400);
    const tools = (await get('/tools')).body.tools as Array<{ wire_name: string; input_schema: unknown }>;
    expect(tools.map((t) => t.wire_name)).toContain('hist-echo__echo');
    const agent = await get(`/agents/${encodeURIComponent('spiffe://local/worker/hist-echo')}`);
    expect(agent.body).toMatchObject({ status: 'live', tools: [{ wire_name: 'hist-echo__echo' }] });
    expect((agent.body.card as { name: string }).name).toBe('hist-echo');
    expect((await get('/agents/nobody')).status).toBe(404);
  });

  it('DELETE /agents/<id> and amf agents forget/approve: operator only, an offline one is forgotten, only a pending one approved', async () => {
    const worker = await mesh.startWorker('gone-soon', ['gone'], echoHandler);
    const id = worker.worker.agentId;
    const path = `/agents/${encodeURIComponent(id)}`;
    // (Forgetting a live agent, how an impostor is thrown out: test/security/mdnsNeverGivesPower.test.ts.)
    expect((await fetch(`${mesh.url}${path}`, { method: 'DELETE' })).status).toBe(401);
    expect((await fetch(`${mesh.url}${path}/approve`, { method: 'POST' })).status).toBe(401);
    const approve = await amf(['agents', 'approve', id, '--coordinator', mesh.url], { AMF_API_KEY: KEY });
    expect(approve.code).toBe(1);
    expect(approve.stderr).toContain(`agent ${id} is live: only a pending agent is approved`);

    await worker.close(1000);
    await mesh.waitFor(() => mesh.coordinator.registry.get(id)?.status === 'offline');
    // AMF_API_KEY, the way a configured key reaches the CLI (the flag shows in /proc/<pid>/cmdline).
    const run = await amf(['agents', 'forget', id, '--coordinator', mesh.url], { AMF_API_KEY: KEY });
    expect(run).toMatchObject({ code: 0, stdout: `forgot ${id}\n`, stderr: '' });
    expect(mesh.coordinator.registry.get(id)).toBeUndefined();
    const entry = await mesh.coordinator.stores.agents.get(kvKey(id));
    expect(entry === null || entry.length === 0).toBe(true);
    const again = await amf(['agents', 'forget', id, '--coordinator', mesh.url, '--api-key', KEY]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('--api-key is readable by every local user');
    expect(again.stderr).toContain(`HTTP 404: no agent ${id} is known`);
  }, 90_000);

  it('the CLI names the coordinator URL it could not reach and what to do', async () => {
    // A port that was just free: nothing listens there.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const closed = new URL(`http://127.0.0.1:${port}`);
    const commands = [['agents'], ['send', '--tag', 'echo', 'hi'], ['events'], ['agents', 'forget', 'x']];
    const runs = await Promise.all(commands.map((args) => amf([...args, '--coordinator', closed.origin])));
    runs.forEach((run, i) => {
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        new RegExp(
          `^amf ${commands[i]![0]}[a-z ]*: cannot reach the coordinator at ${closed.origin.replace(/\./g, '\\.')} \\(`,
        ),
      );
      expect(run.stderr).toContain('(connection refused)');
      expect(run.stderr).toContain('Start one with `amf up`');
    });
  }, 90_000);
});
