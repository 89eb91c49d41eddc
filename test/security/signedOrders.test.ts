// The coordinator's orders to agents are signed with its key (coordinator/signedOrders.ts), and a
// worker that knows that key acts only on orders it signed (worker/coordinatorOrders.ts): a cancel
// in a coordinator's role from anyone else — unsigned, or signed with another key — is ignored.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type AmfEvent } from '../../src/events/cloudEvent.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { checkEventSignature, signEvent } from '../../src/identity/eventSignature.js';
import { subscribeToOrders } from '../../src/worker/coordinatorOrders.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

describe("the coordinator's signed orders", () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
  });
  afterAll(() => mesh?.close());

  const cancel = (taskId: string): AmfEvent =>
    createEvent({
      type: 'amf.task.cancel',
      sender: mesh.coordinator.sender,
      payload: { task_id: taskId, reason: 'task_cancelled', message: 'stop' },
      taskId,
    });

  it('a cancel carries the signature of the coordinator key; a worker that knows it ignores any other', async () => {
    const coordinatorKey = mesh.coordinator.signingKey.publicKey;
    const aborted: string[] = [];
    const workerNc = await mesh.connect('coordinator', 'order-taker');
    const subs = subscribeToOrders(new EventBus(workerNc), {
      agentId: 'spiffe://local/worker/order-taker',
      agentKey: createEphemeralAgentKey().publicKey,
      abort: (taskId) => aborted.push(taskId),
      deliverInput: () => undefined,
      denied: () => undefined,
      coordinatorKey,
    });
    await workerNc.flush();
    // Anyone holding a coordinator-role connection, without the coordinator's key.
    const forger = new EventBus(await mesh.connect('coordinator', 'forger'));
    const unsigned = randomUUID();
    forger.publish(cancel(unsigned));
    const otherKey = randomUUID();
    forger.publish(signEvent(cancel(otherKey), createEphemeralAgentKey()));
    await forger.nc.flush(); // the server has handled the forgeries before the real cancel
    const real = randomUUID();
    mesh.coordinator.bus.publish(cancel(real));
    await mesh.waitFor(() => aborted.includes(real), 10_000, 'the real cancel');
    const seen = await mesh.waitForEvent(
      (e) => e.subject === 'amf.task.cancel' && e.event.amftaskid === real,
      10_000,
      'the cancel on the fabric',
    );
    expect(checkEventSignature(seen.event)).toEqual({ ok: true, signer: coordinatorKey });
    // The forgeries reached the order taker before the real cancel, and were ignored.
    expect(aborted).toEqual([real]);
    expect(aborted).not.toContain(unsigned);
    expect(aborted).not.toContain(otherKey);
    for (const s of subs) s.unsubscribe();
  });
});
