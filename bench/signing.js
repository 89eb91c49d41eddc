/**
 * Signing micro-benchmark (issue 12): the CPU an agent's event costs to sign and the coordinator to
 * verify (docs/security.md, "Signed events"), against the floor of encoding the same event as JSON
 * (which every publish does anyway). Builds a worker's final as MeshWorker does (payload + result
 * signature + event signature) and a claim, and times, per event: JSON.stringify (floor), signing
 * (canonical form + Ed25519), verifying (canonical form + Ed25519 verify, the key object cached as
 * the coordinator caches it). Run after `npm run build`: `node bench/signing.js`.
 *
 * Environment: BENCH_SIGNING_ITERATIONS (default 20000), BENCH_ROUNDS (3; medians).
 */
import { createEvent } from '../dist/events/cloudEvent.js';
import { createEphemeralAgentKey } from '../dist/identity/agentKey.js';
import { checkEventSignature, signEvent } from '../dist/identity/eventSignature.js';

const iterations = Number(process.env.BENCH_SIGNING_ITERATIONS ?? 20_000);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const key = createEphemeralAgentKey();
const sender = {
  identity: 'spiffe://local/worker/bench',
  source: 'http://127.0.0.1:1',
  role: /** @type {const} */ ('specialist'),
  trustDomain: 'local',
};

function finalEvent() {
  return createEvent({
    type: 'amf.result.final',
    sender,
    payload: {
      task_id: '6f1c9c1e-3b7e-4c55-9d43-0f5b8a9e1a11',
      agent_id: sender.identity,
      status: 'completed',
      result: { text: 'x'.repeat(200) },
    },
    taskId: '6f1c9c1e-3b7e-4c55-9d43-0f5b8a9e1a11',
  });
}

/** Microseconds per call of `fn` over `iterations` calls (after a warm-up). */
function perCall(fn) {
  for (let i = 0; i < 1000; i++) fn(i);
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn(i);
  return Number(process.hrtime.bigint() - start) / 1000 / iterations;
}

const events = Array.from({ length: 4096 }, finalEvent);
// Verified events are other events than the signed ones (each has its own id): once this process
// has checked a signature, what it signs itself is remembered as valid (eventSignature.ts), and the
// verification measured here is that of events from another process.
const signed = Array.from({ length: 4096 }, () => JSON.parse(JSON.stringify(signEvent(finalEvent(), key))));
const copies = signed.map((e) => JSON.parse(JSON.stringify(e)));
const check = (e) => {
  if (!checkEventSignature(e).ok) throw new Error('signature did not verify');
};
/** @type {Record<string, number[]>} */
const results = { encode: [], sign: [], verify: [], 'verify + copy': [] };
for (let r = 0; r < rounds; r++) {
  results.encode.push(perCall((i) => JSON.stringify(events[i & 4095])));
  results.sign.push(perCall((i) => signEvent({ ...events[i & 4095] }, key)));
  results.verify.push(perCall((i) => check(signed[i & 4095])));
  results['verify + copy'].push(
    perCall((i) => {
      check(signed[i & 4095]);
      check(copies[i & 4095]);
    }),
  );
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const floor = median(results.encode);
console.log(
  `signing micro-benchmark: ${iterations} events x ${rounds} rounds, a final of ~${JSON.stringify(signed[0]).length} bytes`,
);
for (const [name, xs] of Object.entries(results))
  console.log(
    `${name.padEnd(13)} ${median(xs).toFixed(2).padStart(8)} µs/event  ${(median(xs) / floor).toFixed(1).padStart(6)}x the JSON encode floor`,
  );
