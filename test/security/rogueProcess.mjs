/* global process, URL, TextDecoder */
// A rogue agent in its own OS process (issue 12): it reads an admitted agent's key file from that
// agent's data dir, connects to NATS as that agent's own user, and tries, in order: a final for
// another agent's task (in that agent's name, on the direct and the core subject), taking work of a
// tag it was not admitted for (a pull from that tag's work queue, a claim by task id, its own final
// for such a task without a claim), and publishing on coordinator-only subjects. Task events go both
// ways an agent could send them: on the shared subject (its user may not: NATS refuses) and on its
// own task-event subject (the coordinators' intake judges them). It reports what it saw as one JSON line per attempt on stdout and
// exits; the test checks that the coordinator refused and warned each. Runs the compiled code in dist/.
//
// Usage: node rogueProcess.mjs '<json: {natsUrl, keyFile, victimId, victimUrl, taskId, traceId,
//        otherTag, otherTaskId}>'
import { jetstream } from '@nats-io/jetstream';

const dist = new URL('../../dist/', import.meta.url);
const { loadOrCreateAgentKey } = await import(new URL('identity/agentKey.js', dist).href);
const { connectAsAgent } = await import(new URL('fabric/connect.js', dist).href);
const { createEvent } = await import(new URL('events/cloudEvent.js', dist).href);
const { signEvent, signResult } = await import(new URL('identity/eventSignature.js', dist).href);
const { taskEventSubject } = await import(new URL('fabric/agentUsers.js', dist).href);

const args = JSON.parse(process.argv[2] ?? '{}');
const report = (attempt, outcome) => process.stdout.write(`${JSON.stringify({ attempt, ...outcome })}\n`);

const key = await loadOrCreateAgentKey(args.keyFile);
const nc = await connectAsAgent(args.natsUrl, key, 'rogue-process', { maxReconnectAttempts: 0 });
const errors = [];
void (async () => {
  for await (const s of nc.status()) if (s.type === 'error') errors.push(String(s.error));
})();
const send = (subject, event) => nc.publish(subject, JSON.stringify(event));
/** A task event on its shared subject and on this key's own task-event subject (`route`). */
const sendBothWays = (subject, event, route) => {
  send(subject, event);
  send(taskEventSubject(key.publicKey, route), event);
};
report('connected', { as: key.publicKey });

// 1. A final for the victim's task, in the victim's name, signed with the key this process stole.
const victim = { identity: args.victimId, source: args.victimUrl, role: 'specialist', trustDomain: 'local' };
/** A final for `taskId` in `agentId`'s name (sent by `sender`), signed with the key this process holds. */
const signedFinal = (sender, taskId, agentId, text) =>
  signEvent(
    signResult(
      createEvent({
        type: 'amf.result.final',
        sender,
        payload: { task_id: taskId, agent_id: agentId, status: 'completed', result: { text } },
        taskId,
        traceId: args.traceId,
      }),
      key,
    ),
    key,
  );
const forgedFinal = () => signedFinal(victim, args.taskId, args.victimId, 'FORGED by another process');
try {
  // On this key's own direct-final subject, the only one its user may send finals straight on.
  const reply = await nc.request(
    `amf.internal.final.${key.publicKey}.${args.taskId}`,
    JSON.stringify(forgedFinal()),
    { timeout: 5_000 },
  );
  report('forged_final_direct', { reply: new TextDecoder().decode(reply.data).slice(0, 500) });
} catch (err) {
  report('forged_final_direct', { error: String(err) });
}
try {
  // The seed's keyless form: closed to agents with their own user (NATS refuses the publish).
  await nc.request(`amf.internal.final.${args.taskId}`, JSON.stringify(forgedFinal()), { timeout: 2_000 });
  report('forged_final_seed_subject', { reply: 'answered' });
} catch (err) {
  report('forged_final_seed_subject', { error: String(err) });
}
sendBothWays('amf.result.final', forgedFinal(), 'direct');
report('forged_final_core', { sent: true });

// 2. Work of another tag: its work queue (closed by NATS), then a claim by task id (refused at intake).
try {
  const js = jetstream(nc, { timeout: 2_000 });
  const consumer = await js.consumers.get('AMF_WORK', `workers_${args.otherTag}`);
  const msg = await consumer.next({ expires: 1_000 });
  report('pull_other_tag', { got: msg === null ? 'nothing' : 'a message' });
} catch (err) {
  report('pull_other_tag', { error: String(err) });
}
sendBothWays(
  'amf.task.claim',
  signEvent(
    createEvent({
      type: 'amf.task.claim',
      sender: { ...victim, identity: args.rogueId, source: 'urn:rogue-process' },
      payload: {
        task_id: args.otherTaskId,
        agent_id: args.rogueId,
        required_capability: args.otherTag,
        attempt: 1,
      },
      taskId: args.otherTaskId,
      traceId: args.traceId,
    }),
    key,
  ),
  'mesh',
);
report('claim_other_tag', { sent: true });
// Then its own final for that still unclaimed task, skipping the claim: a result that overtakes its
// claim implies one, so it must meet a claim's rule (admitted for the tag) too.
const ownFinal = signedFinal(
  { ...victim, identity: args.rogueId, source: 'urn:rogue-process' },
  args.otherTaskId,
  args.rogueId,
  'ROGUE answer to a tag it was not admitted for',
);
try {
  const reply = await nc.request(
    `amf.internal.final.${key.publicKey}.${args.otherTaskId}`,
    JSON.stringify(ownFinal),
    { timeout: 5_000 },
  );
  report('final_other_tag', { reply: new TextDecoder().decode(reply.data).slice(0, 500) });
} catch (err) {
  report('final_other_tag', { error: String(err) });
}

// And a failed final for it on the canonical subject, as a seed worker would send one: failing a
// task needs no claim, so without the tag rule this would end someone else's task.
const failedFinal = signedFinal(
  { ...victim, identity: args.rogueId, source: 'urn:rogue-process' },
  args.otherTaskId,
  args.rogueId,
  'ROGUE failure of a task of another tag',
);
failedFinal.data.payload.status = 'failed';
failedFinal.data.payload.error = { code: 'rogue_failure', message: 'failed by a rogue' };
sendBothWays('amf.result.final', signEvent(signResult(failedFinal, key), key), 'direct');
report('failed_final_other_tag', { sent: true });

// 3. Coordinator-only subjects: a cancel, an announcement and a policy deny.
const coordinator = {
  identity: 'spiffe://local/coordinator/rogue',
  source: 'urn:rogue-process',
  role: 'coordinator',
  trustDomain: 'local',
};
send(
  'amf.task.cancel',
  createEvent({
    type: 'amf.task.cancel',
    sender: coordinator,
    payload: {
      task_id: args.taskId,
      reason: 'task_cancelled',
      message: 'rogue cancel',
      agent_id: args.victimId,
    },
    taskId: args.taskId,
    traceId: args.traceId,
  }),
);
send(`amf.task.announce.${args.otherTag}`, { rogue: 'announcement' });
send('amf.policy.deny', { rogue: 'deny' });
await nc.flush();
report('coordinator_subjects', { sent: true });

// Permission errors arrive asynchronously; give the server a round trip to report them.
await nc.flush();
report('done', { errors });
await nc.close();
