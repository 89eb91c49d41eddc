/**
 * The floor of bench/taskPath.js: `node bench/natsResponder.js NATS_URL SUBJECT` answers every request
 * on SUBJECT with the bytes it was sent, from a process of its own (so its CPU is counted like a
 * worker's). No JetStream, no AMF code: what the fabric alone costs for one round trip. Prints
 * `{"ready":true}` once subscribed; exits on SIGTERM or when its parent goes away.
 */
import process from 'node:process';
import { connect } from '@nats-io/transport-node';

const [url, subject] = process.argv.slice(2);
if (!url?.startsWith('nats://') || !subject) {
  process.stderr.write('usage: node bench/natsResponder.js nats://HOST:PORT SUBJECT\n');
  process.exit(2);
}
const nc = await connect({ servers: url, name: 'bench-floor-responder' });
nc.subscribe(subject, {
  callback: (err, msg) => {
    if (!err) msg.respond(msg.data);
  },
});
await nc.flush();
let closing;
const close = () => {
  closing ??= nc.close().finally(() => process.exit(0));
};
process.once('SIGTERM', close);
process.once('SIGINT', close);
process.on('disconnect', close);
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
