// Our A2A client against our own A2A servers: a worker's /a2a, a coordinator's /a2a (dispatching into
// its mesh by metadata.tag), and one mesh bridging another mesh's coordinator as an external agent,
// so a task for `echo` in mesh A is answered by the echo worker of mesh B.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startA2aBridges, type A2aBridges } from '../../src/apps/a2aBridgeApp.js';
import { RemoteA2aAgent } from '../../src/a2aClient/remoteAgent.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

describe('our A2A client against AMF A2A servers', () => {
  let meshA: TestMesh;
  let meshB: TestMesh;
  let echoB: RunningWorker;
  let bridges: A2aBridges;

  beforeAll(async () => {
    [meshA, meshB] = await Promise.all([startTestMesh(), startTestMesh()]);
    echoB = await meshB.startWorker('echo-b', ['echo'], echoHandler);
  });
  afterAll(async () => {
    await bridges?.close();
    await Promise.all([meshA?.close(), meshB?.close()]);
  });

  it("a worker's /a2a answers with its handler (blocking and streamed word by word)", async () => {
    const agent = await RemoteA2aAgent.connect(echoB.url);
    expect(agent.protocolVersion).toBe('1.0');
    expect(await agent.send('worker direct')).toMatchObject({ state: 'completed', text: 'worker direct' });
    const deltas: string[] = [];
    for await (const step of agent.stream('three words here')) if (step.delta) deltas.push(step.delta);
    expect(deltas.join('')).toBe('three words here');
  });

  it("a coordinator's /a2a dispatches by metadata.tag into its mesh", async () => {
    const agent = await RemoteA2aAgent.connect(meshB.url);
    expect(agent.skills.map((s) => s.id)).toContain('echo');
    const reply = await agent.send('through coordinator B', { metadata: { tag: 'echo' } });
    expect(reply).toMatchObject({ kind: 'task', state: 'completed', text: 'through coordinator B' });
  });

  it("mesh A bridges mesh B's coordinator: a task for echo in A is answered in B", async () => {
    bridges = startA2aBridges({
      agents: [{ name: 'mesh-b', url: meshB.url }],
      natsUrl: meshA.coordinator.natsUrl,
      credential: meshA.coordinator.credentials.specialist,
      heartbeatSeconds: 1,
      selfOrigins: [meshA.url],
    });
    await bridges.firstAttempts;
    expect(bridges.status()[0]).toMatchObject({ state: 'bridged', tags: ['mesh-b', 'echo'] });
    await meshA.waitFor(() => meshA.coordinator.registry.isLive('spiffe://local/worker/a2a-mesh-b'), 15_000);
    const res = await fetch(`${meshA.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: 'from mesh A' }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe('from mesh A');
    // The answer really came from mesh B's worker: its final result is on mesh B's fabric.
    await meshB.waitForEvent(
      (e) =>
        e.event.type === 'amf.result.final' &&
        (e.event.data.payload as { agent_id?: string }).agent_id === echoB.worker.agentId &&
        (e.event.data.payload as { result?: { text?: string } }).result?.text === 'from mesh A',
    );
  });
});
