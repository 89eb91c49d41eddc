// The rogue agent (issue 12, item 1): an agent admitted with its own credential tries to act as
// another agent, to take work of a tag it was not admitted for, and to read what is not its own.
// Real nats-server (its permissions), real OPA, real workers joining through the join door. Each
// attempt must be refused AND reported as amf.policy.warning naming the rogue, and the honest task
// must still complete with the honest answer. Task events are tried both ways an agent could send
// them: on the shared subject (NATS refuses the publish: permission_violation) and on the agent's
// own subject, where the coordinators' intake refuses them naming the connection's agent.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream } from '@nats-io/jetstream';
import { createEvent, type AmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import { agentResultSubject, taskEventSubject, type TaskEventRoute } from '../../src/fabric/agentUsers.js';
import { connectAs, connectAsAgent } from '../../src/fabric/connect.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { JOIN_FILE, CREDENTIALS_FILE } from '../../src/fabric/credentials.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { signEvent, signResult } from '../../src/identity/eventSignature.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import {
  settledTerminalEvents,
  startTestMesh,
  type ObservedEvent,
  type TestMesh,
} from '../helpers/meshFixture.js';
import { gatedHandler } from '../helpers/gatedHandler.js';

function payloadOf(e: ObservedEvent): Record<string, unknown> {
  return e.event.data.payload as Record<string, unknown>;
}

describe('a rogue agent with its own credential', () => {
  let mesh: TestMesh;
  let victim: RunningWorker;
  let rogue: RunningWorker;
  let rogueBus: EventBus;
  const gate = gatedHandler();

  beforeAll(async () => {
    mesh = await startTestMesh();
    victim = await mesh.startWorker('victim', ['secret'], gate.handler);
    rogue = await mesh.startWorker('rogue', ['rogue-tag'], echoHandler);
    rogueBus = new EventBus(rogue.nc);
  });
  afterAll(async () => {
    gate.release();
    await mesh?.close();
  });

  const victimId = () => victim.worker.agentId;
  const rogueId = () => rogue.worker.agentId;
  /** Everything the rogue sends in the victim's name: the victim's identity, the rogue's key. */
  const asVictim = (): EventSender => ({
    identity: victimId(),
    source: victim.url,
    role: 'specialist',
    trustDomain: 'local',
  });
  const warned = (reason: string, what: string, extra: (e: ObservedEvent) => boolean = () => true) =>
    mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        payloadOf(e).reason === reason &&
        payloadOf(e).agent_id === rogueId() &&
        extra(e),
      10_000,
      what,
    );
  /**
   * Sends `event` both ways the rogue could: on `shared` (its user may not publish there: NATS
   * refuses, warned naming the rogue) and on its own task-event subject (the intake decides).
   */
  const sendBothWays = async (event: AmfEvent, route: TaskEventRoute, shared: string = event.type) => {
    rogueBus.publish(event, shared);
    rogueBus.publish(event, taskEventSubject(rogue.worker.key.publicKey, route));
    await warned('permission_violation', `${shared} refused by NATS`, (e) =>
      String(payloadOf(e).message).includes(shared),
    );
  };
  /** The intake's refusal of an event in `claimed`'s name from the rogue's own connection. */
  const forgedFromRogue = (what: string, extra: (e: ObservedEvent) => boolean = () => true) =>
    warned(
      'forged_event',
      what,
      (e) =>
        (payloadOf(e).details as { claimed_agent?: string; nats_user?: string }).nats_user ===
          rogue.worker.key.publicKey && extra(e),
    );

  it('cannot answer, claim, delegate for or cancel the victim’s task, which still completes honestly', async () => {
    const updates: string[] = [];
    const answer = mesh.coordinator.dispatcher.submit({
      tag: 'secret',
      task: 'the question',
      timeoutMs: 20_000,
      onUpdate: (u) => updates.push(JSON.stringify(u)),
    });
    const claim = await mesh.waitForEvent(
      (e) => e.subject === 'amf.task.claim' && payloadOf(e).agent_id === victimId(),
      10_000,
      'the victim claims the task',
    );
    const taskId = claim.event.amftaskid!;
    const traceId = claim.event.amftraceid!;
    const forgedFinal = () =>
      createEvent({
        type: 'amf.result.final',
        sender: asVictim(),
        payload: { task_id: taskId, agent_id: victimId(), status: 'completed', result: { text: 'FORGED' } },
        taskId,
        traceId,
      });

    // 1. A final in the victim's name, signed with the rogue's own key, on the core subject and on
    //    the durable results stream (the two intake points of results).
    await sendBothWays(signEvent(forgedFinal(), rogue.worker.key), 'direct');
    await forgedFromRogue('forged final refused', (e) =>
      String(payloadOf(e).message).includes('result.final'),
    );
    // The seed's stored-result subject is not the rogue's to publish on; its own one is, but a
    // result stored there in the victim's name is refused, naming the rogue.
    const storedOnSeedSubject = await rogueBus.publishDurable(
      signEvent(forgedFinal(), rogue.worker.key),
      `amf.internal.result.${taskId}`,
      { msgId: `forged-${taskId}`, giveUpMs: 3_000 },
    );
    expect(storedOnSeedSubject).toBe('gave_up');
    await warned('permission_violation', 'the seed stored-result subject refused by NATS', (e) =>
      String(payloadOf(e).message).includes(`amf.internal.result.${taskId}`),
    );
    const stored = await rogueBus.publishDurable(
      signEvent(forgedFinal(), rogue.worker.key),
      agentResultSubject(rogue.worker.key.publicKey, taskId),
      { msgId: `forged-own-${taskId}`, giveUpMs: 5_000 },
    );
    expect(stored).toBe('stored');
    await forgedFromRogue('forged stored result refused', (e) =>
      String(payloadOf(e).message).includes('results stream'),
    );
    // 1b. Unsigned: its connection still names the rogue, never the victim.
    rogueBus.publish(forgedFinal(), taskEventSubject(rogue.worker.key.publicKey, 'direct'));
    await forgedFromRogue(
      'unsigned final refused',
      (e) => (payloadOf(e).details as { claimed_agent?: string }).claimed_agent === victimId(),
    );
    // 1c. Dressed up as a coordinator's relayed final: refused, naming the rogue all the same.
    const relayed = signResult(forgedFinal(), rogue.worker.key);
    relayed.amfagentrole = 'coordinator';
    relayed.data.auth_context.identity = 'spiffe://local/coordinator/evil';
    rogueBus.publish(relayed, taskEventSubject(rogue.worker.key.publicKey, 'direct'));
    await forgedFromRogue('forged relayed final refused', (e) =>
      String(payloadOf(e).message).includes('as a coordinator'),
    );

    // 2. A claim and progress in the victim's name; a claim naming the victim from the rogue itself.
    await sendBothWays(
      signEvent(
        createEvent({
          type: 'amf.task.progress',
          sender: asVictim(),
          payload: { task_id: taskId, agent_id: victimId(), message: 'forged progress' },
          taskId,
          traceId,
        }),
        rogue.worker.key,
      ),
      'mesh',
    );
    await forgedFromRogue('forged progress refused', (e) =>
      String(payloadOf(e).message).includes('progress'),
    );
    await sendBothWays(
      signEvent(
        createEvent({
          type: 'amf.task.claim',
          sender: { ...asVictim(), identity: rogueId() },
          payload: { task_id: taskId, agent_id: victimId(), required_capability: 'secret', attempt: 1 },
          taskId,
          traceId,
        }),
        rogue.worker.key,
      ),
      'mesh',
    );
    await forgedFromRogue('claim naming another agent refused', (e) =>
      String(payloadOf(e).message).includes('amf.task.claim'),
    );

    // 2b. Stream chunks in the victim's name straight to the requester (the reply subject).
    await sendBothWays(
      signEvent(
        createEvent({
          type: 'amf.result.partial',
          sender: asVictim(),
          payload: { task_id: taskId, agent_id: victimId(), seq: 0, delta: 'FORGED chunk' },
          taskId,
          traceId,
        }),
        rogue.worker.key,
      ),
      'mesh',
      `amf.internal.reply.${taskId}`,
    );
    await forgedFromRogue('forged chunk refused', (e) => String(payloadOf(e).message).includes('partial'));

    // 3. A delegation in the victim's name: no child task may come of it.
    const childTaskId = `forged-child-${taskId.slice(0, 8)}`;
    await sendBothWays(
      signEvent(
        createEvent({
          type: 'amf.task.delegate',
          sender: asVictim(),
          payload: {
            parent_task_id: taskId,
            child_task_id: childTaskId,
            agent_id: victimId(),
            task: 'exfiltrate',
            required_capability: 'rogue-tag',
          },
          taskId,
          traceId,
        }),
        rogue.worker.key,
      ),
      'direct',
    );
    await forgedFromRogue('forged delegation refused', (e) =>
      String(payloadOf(e).message).includes('delegate'),
    );

    // 4. A cancel in the coordinator's name: the server refuses the publish, the coordinator says so.
    rogueBus.publish(
      createEvent({
        type: 'amf.task.cancel',
        sender: {
          identity: 'spiffe://local/coordinator/evil',
          source: 'x:',
          role: 'coordinator',
          trustDomain: 'local',
        },
        payload: {
          task_id: taskId,
          reason: 'task_cancelled',
          message: 'forged cancel',
          agent_id: victimId(),
        },
        taskId,
        traceId,
      }),
    );
    await warned('permission_violation', 'cancel refused by NATS', (e) =>
      String(payloadOf(e).message).includes('amf.task.cancel'),
    );

    // The honest answer is the one and only ending; the victim is still the claimant.
    expect(mesh.coordinator.lifecycle.get(taskId)?.claimedBy).toBe(victimId());
    gate.release();
    expect((await answer).text).toBe('honest: the question');
    // The rogue's forgeries are on the fabric too (anyone may read them): the ending that counts is
    // the coordinator's own, and there is exactly one.
    const endings = (await settledTerminalEvents(mesh, taskId)).filter(
      (e) => e.event.data.auth_context.identity === mesh.coordinator.sender.identity,
    );
    expect(endings).toHaveLength(1);
    expect((payloadOf(endings[0]!).result as { text: string }).text).toBe('honest: the question');
    expect(mesh.events.some((e) => e.event.amftaskid === childTaskId)).toBe(false);
    expect(updates.join('\n')).not.toContain('FORGED');
  });

  it('cannot mark the victim offline with a heartbeat in its name', async () => {
    const record = { ...victim.worker.agentRecord('offline'), nkey: rogue.worker.key.publicKey };
    rogueBus.publish(
      signEvent(
        createEvent({ type: 'amf.discovery.agent.heartbeat', sender: asVictim(), payload: record }),
        rogue.worker.key,
      ),
    );
    await warned('forged_event', 'forged offline heartbeat refused', (e) =>
      String(payloadOf(e).message).includes('heartbeat'),
    );
    // A fresh key in the advertisement does not help either: the victim's own key is bound.
    const stranger = createEphemeralAgentKey();
    rogueBus.publish(
      signEvent(
        createEvent({
          type: 'amf.discovery.agent.heartbeat',
          sender: asVictim(),
          payload: { ...record, nkey: stranger.publicKey },
        }),
        stranger,
      ),
    );
    await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        payloadOf(e).reason === 'agent_key_mismatch' &&
        payloadOf(e).agent_id === `key ${stranger.publicKey}`,
      10_000,
      'heartbeat under a stranger key refused',
    );
    // Still live, still served: the victim answers a new task.
    expect(mesh.coordinator.registry.isLive(victimId())).toBe(true);
    const answer = await mesh.coordinator.dispatcher.submit({
      tag: 'secret',
      task: 'still here?',
      timeoutMs: 10_000,
    });
    expect(answer.text).toBe('honest: still here?');
  });

  it('cannot take work of a tag it was not admitted for', async () => {
    // The work queue of `secret`: the rogue's NATS user has no grant on its consumer.
    const js = jetstream(rogue.nc, { timeout: 1_000 });
    await expect(
      js.consumers.get('AMF_WORK', 'workers_secret').then((c) => c.next({ expires: 1_000 })),
    ).rejects.toThrow();
    await warned('permission_violation', 'pull of another tag refused', (e) =>
      String(payloadOf(e).message).includes('workers_secret'),
    );
    // The seed's core queue group for the tag: not readable by an agent user either.
    rogue.nc.subscribe('amf.task.announce.secret', { queue: 'workers.secret' });
    await warned('permission_violation', 'queue group subscription refused', (e) =>
      String(payloadOf(e).message).includes('amf.task.announce.secret'),
    );
    const answer = await mesh.coordinator.dispatcher.submit({
      tag: 'secret',
      task: 'mine',
      timeoutMs: 10_000,
    });
    expect(answer.text).toBe('honest: mine');
  });

  it('cannot work without being admitted: the join credential only advertises, an unknown key is refused', async () => {
    const joinNc = await connectAs(mesh.coordinator.natsUrl, mesh.coordinator.joinCredential, 'unadmitted', {
      maxReconnectAttempts: 0,
    });
    try {
      joinNc.subscribe('amf.task.>');
      joinNc.publish('amf.task.claim', '{}');
      await joinNc.flush();
      for (const subject of ['amf.task.>', 'amf.task.claim'])
        await mesh.waitForEvent(
          (e) =>
            e.subject === 'amf.policy.warning' &&
            payloadOf(e).reason === 'permission_violation' &&
            payloadOf(e).agent_id === 'amf-join' &&
            (payloadOf(e).details as { subject?: string }).subject === subject,
          10_000,
          `join user refused ${subject}`,
        );
    } finally {
      await joinNc.close();
    }
    await expect(
      connectAsAgent(mesh.coordinator.natsUrl, createEphemeralAgentKey(), 'never-admitted', {
        maxReconnectAttempts: 0,
      }),
    ).rejects.toMatchObject({ code: 'NATS_AUTH_FAILED' });
  });

  it('is given no other role’s secret: join.json holds the join credential only, every secret file is 0600', async () => {
    const dataDir = mesh.config.dataDir;
    const joinText = await readFile(join(dataDir, JOIN_FILE), 'utf8');
    expect(Object.keys(JSON.parse(joinText) as object).sort()).toEqual(['password', 'user']);
    const roles = JSON.parse(await readFile(join(dataDir, CREDENTIALS_FILE), 'utf8')) as Record<
      string,
      { password: string }
    >;
    for (const role of Object.values(roles)) expect(joinText).not.toContain(role.password);
    for (const file of [JOIN_FILE, CREDENTIALS_FILE])
      expect((await stat(join(dataDir, file))).mode & 0o777).toBe(0o600);
    // The coordinator's password does not open the door for the join user's password.
    await expect(
      connectAs(
        mesh.coordinator.natsUrl,
        { user: 'amf-coordinator', password: mesh.coordinator.joinCredential.password },
        'x',
        {
          maxReconnectAttempts: 0,
        },
      ),
    ).rejects.toMatchObject({ code: 'NATS_AUTH_FAILED' });
  });
});
