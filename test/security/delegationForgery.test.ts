/**
 * Attack H3 (issue 29), forged delegation results: a delegating worker took the first
 * `amf.result.final` carrying its child's task id, checking nothing, so a final published by any
 * admitted agent (even unsigned) became the parent's answer. Now the delegator takes its child's
 * final only on its own NATS inbox, named in the delegation, where the coordinator that accepted the
 * child's result sends it and no other agent may publish (worker/delegationClient.ts).
 *
 * Here an admitted agent, with its own credential and key, knows the child's id and publishes
 * forgeries every way it can: unsigned, signed in its own name, dressed as a coordinator's relayed
 * final carrying a valid result signature (its own), and straight into the delegator's inbox. Without
 * the fix the first forgery is the parent's answer (`plan: FORGED ...`); with it, the parent's
 * answer is the child worker's honest one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { connectAsAgent, type NatsConnection } from '../../src/fabric/connect.js';
import { agentInboxPrefix, taskEventSubject } from '../../src/fabric/agentUsers.js';
import { signEvent, signResult } from '../../src/identity/eventSignature.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { gatedHandler } from '../helpers/gatedHandler.js';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';

const payloadOf = (e: ObservedEvent) => e.event.data.payload as Record<string, unknown>;

const planner: WorkerHandler = {
  name: 'planner',
  description: 'delegates the work and reports the answer it got',
  handle: async (ctx) => `plan: ${await ctx.delegate('slow', ctx.text, { timeoutMs: 30_000 })}`,
};

describe('forged delegation results (H3)', () => {
  let mesh: TestMesh;
  let delegator: RunningWorker;
  let child: RunningWorker;
  let rogue: RunningWorker;
  let rogueNc: NatsConnection;
  const childGate = gatedHandler();
  const violations: string[] = [];

  beforeAll(async () => {
    mesh = await startTestMesh({ legacySpecialistUser: false });
    delegator = await mesh.startWorker('planner', ['plan'], planner);
    child = await mesh.startWorker('slowpoke', ['slow'], childGate.handler);
    rogue = await mesh.startWorker('rogue', ['rogue-tag'], echoHandler);
    rogueNc = await connectAsAgent(mesh.coordinator.natsUrl, rogue.worker.key, 'rogue-forger', {
      maxReconnectAttempts: 0,
    });
    void (async () => {
      for await (const s of rogueNc.status()) if (s.type === 'error') violations.push(String(s.error));
    })();
  });
  afterAll(async () => {
    childGate.release();
    await rogueNc?.close();
    await mesh?.close();
  });

  it('never becomes the parent’s answer: only the child worker’s final, relayed to the delegator’s inbox, does', async () => {
    const answer = mesh.coordinator.dispatcher.submit({
      tag: 'plan',
      task: 'the real work',
      timeoutMs: 60_000,
    });
    const childClaim = await mesh.waitForEvent(
      (e) => e.subject === 'amf.task.claim' && payloadOf(e).agent_id === child.worker.agentId,
      10_000,
      'the child task claimed',
    );
    const childId = childClaim.event.amftaskid!;
    const rogueId = rogue.worker.agentId;
    const asRogue: EventSender = {
      identity: rogueId,
      source: rogue.url,
      role: 'specialist',
      trustDomain: 'local',
    };
    const forged = (text: string, sender: EventSender, agentId: string) =>
      createEvent({
        type: 'amf.result.final',
        sender,
        payload: { task_id: childId, agent_id: agentId, status: 'completed', result: { text } },
        taskId: childId,
      });
    const publish = (subject: string, event: object) => rogueNc.publish(subject, JSON.stringify(event));
    // Each final both ways an agent could send it: on the shared subject (NATS refuses the publish)
    // and on its own task-event subject (the coordinators' intake records only its own-name ones).
    const publishBothWays = (event: object) => {
      publish('amf.result.final', event);
      publish(taskEventSubject(rogue.worker.key.publicKey, 'direct'), event);
    };
    // 1. Unsigned, in the child worker's name.
    publishBothWays(forged('FORGED unsigned', asRogue, child.worker.agentId));
    // 2. Signed by the rogue, in its own name.
    publishBothWays(signEvent(forged('FORGED signed', asRogue, rogueId), rogue.worker.key));
    // 3. Dressed as a coordinator's relayed final, with a valid result signature (the rogue's own).
    const asCoordinator: EventSender = {
      identity: mesh.coordinator.sender.identity,
      source: mesh.url,
      role: 'coordinator',
      trustDomain: 'local',
    };
    publishBothWays(signResult(forged('FORGED relayed', asCoordinator, rogueId), rogue.worker.key));
    // 4. Straight into the delegator's own inbox, where its child's final is expected.
    const inbox = `${agentInboxPrefix(delegator.worker.key.publicKey)}.delegation.${childId}`;
    publish(inbox, signResult(forged('FORGED in the inbox', asCoordinator, rogueId), rogue.worker.key));
    await rogueNc.flush();
    // The one in the rogue's own name reached the fabric (where the delegator must ignore it); the
    // one in the child's name and the one dressed as a coordinator's were refused at the intake...
    await mesh.waitFor(
      () =>
        mesh.events.some(
          (e) =>
            e.subject === 'amf.result.final' &&
            e.event.amftaskid === childId &&
            (e.event.data.payload as { result?: { text?: string } }).result?.text === 'FORGED signed',
        ),
      10_000,
      'the rogue’s own final on amf.result.final',
    );
    for (const what of ['in the name of ' + child.worker.agentId, 'as a coordinator'])
      await mesh.waitForEvent(
        (e) =>
          e.subject === 'amf.policy.warning' &&
          payloadOf(e).reason === 'forged_event' &&
          payloadOf(e).agent_id === rogueId &&
          String(payloadOf(e).message).includes(what),
        10_000,
        `the forged final ${what} refused at the intake`,
      );
    // ...NATS refused each on the shared subject...
    await mesh.waitFor(
      () => violations.some((v) => v.includes('Permissions Violation') && v.includes('amf.result.final')),
      10_000,
      'the publishes on amf.result.final refused by NATS',
    );
    // ...and NATS refused the one into another agent's inbox.
    await mesh.waitFor(
      () => violations.some((v) => v.includes('Permissions Violation') && v.includes('_INBOX')),
      10_000,
      'the publish into the delegator’s inbox refused by NATS',
    );
    expect(delegator.worker.inFlightCount).toBe(1);

    childGate.release();
    const result = await answer;
    expect(result.text).toBe('plan: honest: the real work');
    expect(result.agentId).toBe(delegator.worker.agentId);
  }, 60_000);
});
