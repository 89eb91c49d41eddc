// `POST /publish` tried as an attacker: the HTTP edge speaks for no one else. A local process
// without the API key cannot cancel, announce, heartbeat or notice in anyone's name (403 naming the
// type) and the victim's in-flight task completes; whatever it may publish carries its own identity,
// never role coordinator. With the API key, a cancel runs through the lifecycle: the claimant stops
// and the task ends in exactly one terminal event.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import type { AmfEventType } from '../../src/events/eventTypes.js';
import type { AmfPayloadMap, FinalPayload, PolicyPayload } from '../../src/events/payloads.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { eventsFor, settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

/** What an attacker writes into the body: the coordinator's own name and role. */
const FORGED_COORDINATOR: EventSender = {
  identity: 'spiffe://local/coordinator/amf-coordinator',
  source: 'http://127.0.0.1:8765',
  role: 'coordinator',
  trustDomain: 'local',
};

interface PublishReply {
  accepted?: boolean;
  task_id?: string;
  published_as?: { source: string; role: string; identity: string };
  error?: { code: string; message: string; type?: string; allowed?: string[] };
}

/** A handler that takes `ms` unless its task is cancelled; records the cancellations it saw. */
function slowHandler(ms: number, aborted: string[]): WorkerHandler {
  return {
    name: 'slow',
    description: 'answers after a while',
    handle: (ctx) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => resolve({ text: `done ${ctx.text}` }), ms);
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          aborted.push(ctx.taskId);
          reject(new Error('aborted'));
        });
      }),
  };
}

function forged<T extends AmfEventType>(type: T, payload: AmfPayloadMap[T], taskId?: string) {
  return createEvent({ type, sender: FORGED_COORDINATOR, payload, ...(taskId ? { taskId } : {}) });
}

async function publish(
  url: string,
  event: object,
  apiKey?: string,
): Promise<{ status: number; body: PublishReply }> {
  const res = await fetch(`${url}/publish`, {
    method: 'POST',
    headers: {
      'content-type': 'application/cloudevents+json',
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
    },
    body: JSON.stringify(event),
  });
  return { status: res.status, body: (await res.json()) as PublishReply };
}

/** Announces a task through the dispatcher (as any client would) and waits for its claim. */
async function claimedTask(mesh: TestMesh, text: string): Promise<string> {
  const task = mesh.coordinator.lifecycle.announce({ tag: 'slow', task: text });
  await mesh.waitForEvent(
    (e) => e.event.type === 'amf.task.claim' && e.event.amftaskid === task.taskId,
    10_000,
    'the claim of the victim task',
  );
  // Seen on the fabric is not yet decided: the coordinator checks the claim's signature first.
  await mesh.waitFor(
    () => mesh.coordinator.lifecycle.get(task.taskId)?.claimedBy !== undefined,
    10_000,
    'the coordinator to record the claim',
  );
  return task.taskId;
}

describe('POST /publish without an API key (anonymous local client)', () => {
  let mesh: TestMesh;
  const aborted: string[] = [];

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('victim-worker', ['slow'], slowHandler(1500, aborted));
  });
  afterAll(() => mesh?.close());

  it('refuses cancel, announce, heartbeat, policy and worker events with 403 naming the type; the victim task completes', async () => {
    const taskId = await claimedTask(mesh, 'victim');
    const agentId = mesh.coordinator.registry.list()[0]!.record.agent_id;
    const attempts: Array<{ type: AmfEventType; event: object }> = [
      {
        type: 'amf.task.cancel',
        event: forged(
          'amf.task.cancel',
          { task_id: taskId, reason: 'task_cancelled', message: 'gotcha' },
          taskId,
        ),
      },
      {
        type: 'amf.task.announce',
        event: forged('amf.task.announce', {
          task_id: randomUUID(),
          task: 'mine',
          required_capability: 'slow',
        }),
      },
      {
        type: 'amf.discovery.agent.heartbeat',
        event: forged('amf.discovery.agent.heartbeat', {
          agent_id: 'intruder',
          endpoint: 'http://127.0.0.1:9/',
          protocols_supported: ['A2A/1.0'],
          capability_tags: ['slow'],
        }),
      },
      {
        type: 'amf.policy.deny',
        event: forged(
          'amf.policy.deny',
          { reason: 'task_cancelled', message: 'gotcha', task_id: taskId, terminal: true, state: 'failed' },
          taskId,
        ),
      },
      {
        type: 'amf.policy.warning',
        event: forged(
          'amf.policy.warning',
          { reason: 'worker_silent', message: 'gotcha', task_id: taskId },
          taskId,
        ),
      },
      {
        type: 'amf.task.claim',
        event: forged('amf.task.claim', { task_id: taskId, agent_id: agentId }, taskId),
      },
      {
        type: 'amf.result.final',
        event: forged(
          'amf.result.final',
          { task_id: taskId, agent_id: agentId, status: 'completed', result: { text: 'forged' } },
          taskId,
        ),
      },
    ];
    const refusedIds = new Set<string>();
    for (const attempt of attempts) {
      const { status, body } = await publish(mesh.url, attempt.event);
      expect(status, attempt.type).toBe(403);
      expect(body.error?.code, attempt.type).toBe('FORBIDDEN');
      expect(body.error?.type, attempt.type).toBe(attempt.type);
      expect(body.error?.message, attempt.type).toContain(attempt.type);
      expect(body.error?.allowed, attempt.type).toEqual(['amf.artifact.publish', 'amf.evidence.publish']);
      refusedIds.add((attempt.event as { id: string }).id);
    }

    const terminal = await settledTerminalEvents(mesh, taskId);
    expect(terminal).toHaveLength(1);
    expect(terminal[0]!.event.type).toBe('amf.result.final');
    const final = terminal[0]!.event.data.payload as FinalPayload;
    expect(final.status).toBe('completed');
    expect(final.result?.text).toBe('done victim');
    expect(aborted).not.toContain(taskId);
    expect(mesh.coordinator.lifecycle.get(taskId)?.state).toBe('completed');
    // None of the refused events reached the fabric, and no cancel was ever sent for the task.
    expect(mesh.events.filter((e) => refusedIds.has(e.event.id))).toEqual([]);
    expect(eventsFor(mesh, taskId, 'amf.task.cancel')).toEqual([]);
  });

  it('publishes evidence as amf:http-client with role connector, whatever the body claims', async () => {
    const event = forged('amf.evidence.publish', { finding: 'from a local process' });
    const { status, body } = await publish(mesh.url, event);
    expect(status).toBe(202);
    expect(body.published_as).toEqual({
      source: 'urn:amf:http-client',
      role: 'connector',
      identity: 'amf:http-client',
    });
    const seen = await mesh.waitForEvent((e) => e.event.id === event.id, 10_000, 'the evidence event');
    expect(seen.event.amfagentrole).toBe('connector');
    expect(seen.event.source).toBe('urn:amf:http-client');
    expect(seen.event.amftrustdomain).toBe(mesh.config.identity.trustDomain);
    expect(seen.event.data.auth_context).toEqual({
      identity: 'amf:http-client',
      trust_domain: mesh.config.identity.trustDomain,
      scopes: [],
      granted_by: 'amf:http-client',
      delegation_chain: [],
    });
    expect(seen.event.data.payload).toEqual({ finding: 'from a local process' });
  });
});

describe('POST /publish with the API key (the operator)', () => {
  const KEY = 'operator-key';
  let mesh: TestMesh;
  const aborted: string[] = [];

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { coordinator: { apiKey: KEY } } });
    await mesh.startWorker('slow-worker', ['slow'], slowHandler(5000, aborted));
  });
  afterAll(() => mesh?.close());

  it('refuses a wrong key (401 before anything is read), never treating it as anonymous', async () => {
    const { status, body } = await publish(mesh.url, forged('amf.evidence.publish', { x: 1 }), 'wrong');
    expect(status).toBe(401);
    expect(body.error?.code).toBe('UNAUTHORIZED');
    // Without any key, a loopback client is the anonymous caller, whatever key is configured.
    const anonymous = await publish(mesh.url, forged('amf.evidence.publish', { x: 2 }));
    expect(anonymous.status).toBe(202);
    expect(anonymous.body.published_as?.identity).toBe('amf:http-client');
  });

  it('cancels through the lifecycle: the claimant stops and the task ends in exactly one terminal event', async () => {
    const taskId = await claimedTask(mesh, 'to be cancelled');
    const cancel = forged(
      'amf.task.cancel',
      { task_id: taskId, reason: 'task_cancelled', message: 'no longer needed' },
      taskId,
    );
    const { status, body } = await publish(mesh.url, cancel, KEY);
    expect(status, JSON.stringify(body)).toBe(202);
    expect(body).toMatchObject({ accepted: true, task_id: taskId, subject: 'amf.task.cancel' });
    expect(body.published_as?.identity).toBe('amf:operator');

    const terminal = await settledTerminalEvents(mesh, taskId);
    expect(terminal).toHaveLength(1);
    expect(terminal[0]!.event.type).toBe('amf.policy.deny');
    const deny = terminal[0]!.event.data.payload as PolicyPayload;
    expect(deny).toMatchObject({ reason: 'task_cancelled', terminal: true, state: 'failed' });
    expect(deny.message).toBe('cancelled by amf:operator: no longer needed');
    // The cancel on the fabric is the coordinator's own (a new event), not the body sent here.
    const cancels = eventsFor(mesh, taskId, 'amf.task.cancel');
    expect(cancels).toHaveLength(1);
    expect(cancels[0]!.event.id).not.toBe(cancel.id);
    expect(cancels[0]!.event.source).toBe(mesh.coordinator.sender.source);
    await mesh.waitFor(() => aborted.includes(taskId), 5000, 'the handler aborted');
    // The worker published no result after the cancel, so the task still has one ending.
    await new Promise((r) => setTimeout(r, 300));
    expect(eventsFor(mesh, taskId, 'amf.result.final')).toEqual([]);

    // A second cancel of the ended task is refused and ends nothing more.
    const again = await publish(mesh.url, { ...cancel, id: randomUUID() }, KEY);
    expect(again.status).toBe(400);
    expect(again.body.error?.message).toContain('already ended');
    expect((await settledTerminalEvents(mesh, taskId)).length).toBe(1);
  });

  it('answers 404 for a cancel of a task this coordinator does not know', async () => {
    const unknown = randomUUID();
    const { status } = await publish(
      mesh.url,
      forged('amf.task.cancel', { task_id: unknown, reason: 'task_cancelled', message: 'x' }, unknown),
      KEY,
    );
    expect(status).toBe(404);
  });

  it('still refuses heartbeats and policy notices, and stamps evidence with the operator identity', async () => {
    for (const type of ['amf.discovery.agent.heartbeat', 'amf.policy.warning'] as const) {
      const event =
        type === 'amf.policy.warning'
          ? forged(type, { reason: 'x', message: 'y' })
          : forged(type, {
              agent_id: 'intruder',
              endpoint: 'http://127.0.0.1:9/',
              protocols_supported: ['A2A/1.0'],
            });
      const { status, body } = await publish(mesh.url, event, KEY);
      expect(status, type).toBe(403);
      expect(body.error?.type).toBe(type);
      expect(body.error?.allowed).toEqual([
        'amf.artifact.publish',
        'amf.evidence.publish',
        'amf.task.announce',
        'amf.task.cancel',
      ]);
    }
    const evidence = forged('amf.artifact.publish', { uri: 'file:///tmp/x' });
    expect((await publish(mesh.url, evidence, KEY)).status).toBe(202);
    const seen = await mesh.waitForEvent((e) => e.event.id === evidence.id, 10_000, 'the artifact event');
    expect(seen.event.amfagentrole).toBe('connector');
    expect(seen.event.data.auth_context.identity).toBe('amf:operator');
    expect(seen.event.source).toBe('urn:amf:operator');
  });
});
