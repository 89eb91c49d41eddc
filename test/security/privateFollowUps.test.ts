// Follow-ups go only to the task's holder (issue 29, M3). A requester's answer to an input-required
// task ("my PIN is …") travels on the holder's own subject (`amf.agent.<nkey>.input`), which
// nats-server lets no other agent read. Another admitted agent subscribes to everything its NATS
// user may, tries the subjects a follow-up could travel on (each refused), and never sees the text;
// the holder gets it and answers with it. Real nats-server, real workers joining as agents do.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errors, type PermissionViolationError, type Subscription } from '@nats-io/transport-node';
import { sendTaskInput } from '../../src/coordinator/tasks/input.js';
import { agentInputSubject, agentPermissions } from '../../src/fabric/agentUsers.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const SECRET = '4711-SECRET';

/** Asks for the PIN, then says whether it was right (without repeating it: finals are public). */
const asksForPin: WorkerHandler = {
  name: 'asks-for-pin',
  description: 'multi-turn: asks the requester for a PIN',
  handle: async (ctx) => {
    const answer = await ctx.requestInput('your PIN, please');
    return answer.text === `my PIN is ${SECRET}` ? 'PIN accepted' : `wrong PIN (${answer.text.length} chars)`;
  },
};

describe('a follow-up reaches the holder of its task and no other agent', () => {
  let mesh: TestMesh;
  let holder: RunningWorker;
  let other: RunningWorker;

  beforeAll(async () => {
    mesh = await startTestMesh();
    holder = await mesh.startWorker('pin-holder', ['pin'], asksForPin);
    other = await mesh.startWorker('pin-snoop', ['snoop'], echoHandler);
  }, 60_000);
  afterAll(async () => {
    await mesh?.close();
  });

  it('is read by the holder only, whatever else the other agent subscribes to', async () => {
    const seen: string[] = [];
    const record = (subject: string): Subscription =>
      other.nc.subscribe(subject, {
        callback: (err, msg) => {
          if (!err) seen.push(`${msg.subject} ${msg.string()}`);
        },
      });
    // Everything the other agent's NATS user may read.
    const allowed = agentPermissions({ nkey: other.worker.key.publicKey, tags: ['snoop'] }).subscribe.allow;
    expect(allowed).not.toContain('amf.task.input');
    for (const subject of allowed) record(subject);
    // And what a follow-up could travel on: the seed's subject, the holder's own, all agents', all.
    const tried = [
      'amf.task.input',
      agentInputSubject(holder.worker.key.publicKey),
      'amf.agent.*.input',
      'amf.agent.>',
      'amf.>',
      '>',
    ];
    const refused = tried.map((subject) => ({ subject, closed: record(subject).closed }));
    await other.nc.flush();
    for (const { subject, closed } of refused) {
      const err = await closed;
      expect(err, subject).toBeInstanceOf(errors.PermissionViolationError);
      expect((err as PermissionViolationError).operation, subject).toBe('subscription');
    }

    const answer = mesh.coordinator.dispatcher.submit({ tag: 'pin', task: 'log me in', timeoutMs: 20_000 });
    const blocked = await mesh.waitForEvent(
      (e) =>
        e.event.type === 'amf.task.blocked' &&
        (e.event.data.payload as { agent_id?: string }).agent_id === holder.worker.agentId,
      10_000,
      'the holder to ask for input',
    );
    const taskId = blocked.event.amftaskid!;
    // The observer may see the notice before the lifecycle has taken the claim behind it.
    await mesh.waitFor(
      () => mesh.coordinator.lifecycle.get(taskId)?.state === 'blocked',
      10_000,
      'the lifecycle to see the task blocked',
    );
    sendTaskInput(mesh.coordinator, taskId, { text: `my PIN is ${SECRET}` });

    // The holder got it: it checked the PIN.
    const result = await answer;
    expect(result.text).toBe('PIN accepted');
    expect(result.agentId).toBe(holder.worker.agentId);
    // The follow-up went out on the holder's own subject only.
    const inputs = mesh.events.filter(
      (e) => e.event.type === 'amf.task.input' && e.event.amftaskid === taskId,
    );
    expect(inputs.map((e) => e.subject)).toEqual([agentInputSubject(holder.worker.key.publicKey)]);

    // The task's final reaches the other agent (it may read finals) after the follow-up was sent
    // from the same coordinator connection: NATS keeps a publisher's order, so by then the
    // follow-up would have arrived too, had the other agent been able to read it.
    await mesh.waitFor(
      () => seen.some((s) => s.startsWith('amf.result.final ') && s.includes(taskId)),
      10_000,
      'the final on the other agent',
    );
    expect(seen.filter((s) => s.includes(SECRET))).toEqual([]);
    expect(seen.some((s) => s.includes(taskId))).toBe(true);
  });
});
