/**
 * The system under test for `npm run bench`, in a process of its own so that the load generator's
 * memory and CPU do not pollute the coordinator's numbers.
 *
 * Starts a coordinator (which spawns its own nats-server on a random port), its HTTP edge, the
 * built-in echo worker (tag `echo`) and a raw NATS responder on `bench.floor` (the request/reply
 * floor: it answers every request with the bytes it was sent). When everything is up it prints ONE
 * JSON line on stdout:
 *
 *   {"pid":..,"coordinatorUrl":"http://127.0.0.1:..","workerUrl":"http://127.0.0.1:..",
 *    "natsUrl":"nats://127.0.0.1:..","natsPid":..,"dataDir":"/tmp/amf-bench-..","floorSubject":"bench.floor"}
 *
 * NATS passwords are not printed: they are in `<dataDir>/credentials.json` (mode 0600).
 *
 * Control, when started with an IPC channel (as bench/run.js does): `{cmd: 'memory', gc: true}` is
 * answered with `{type: 'memory', memory: process.memoryUsage(), active, pending}` after a full GC
 * (start with --expose-gc). The process shuts everything down and exits on SIGTERM, SIGINT, when the
 * IPC channel closes (the parent died) or on `{cmd: 'shutdown'}`.
 *
 * Standalone: `node --expose-gc bench/meshServer.js` (Ctrl-C to stop).
 *
 * Environment: BENCH_WORKER_CONCURRENCY (echo worker's handler concurrency, default 16 as in
 * `amf worker`), BENCH_HEARTBEAT_SECONDS (default: the configuration default, 5).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const DIST = new URL('../dist/', import.meta.url);
if (!existsSync(new URL('coordinator/coordinator.js', DIST))) {
  process.stderr.write('meshServer: dist/ is missing: run `npm run build` first\n');
  process.exit(2);
}

const { loadConfig } = await import(new URL('config/config.js', DIST).href);
const { Coordinator } = await import(new URL('coordinator/coordinator.js', DIST).href);
const { startCoordinatorHttp } = await import(new URL('http/coordinatorHttp.js', DIST).href);
const { startWorker } = await import(new URL('worker/startWorker.js', DIST).href);
const { echoHandler } = await import(new URL('worker/handlers/echo.js', DIST).href);
const { connectAs } = await import(new URL('fabric/connect.js', DIST).href);

const FLOOR_SUBJECT = 'bench.floor';

const dataDir = await mkdtemp(join(tmpdir(), 'amf-bench-'));
let coordinator;
let http;
let worker;
let responder;
let stopping;

function stop(code = 0) {
  stopping ??= (async () => {
    const quietly = (p) => Promise.resolve(p).catch(() => undefined);
    await quietly(worker?.close(5000));
    await quietly(responder?.close());
    await quietly(http?.close());
    await quietly(coordinator?.close());
    await quietly(rm(dataDir, { recursive: true, force: true }));
    if (process.connected) process.disconnect();
    process.exit(code);
  })();
  return stopping;
}

process.once('SIGTERM', () => void stop(0));
process.once('SIGINT', () => void stop(0));
process.on('disconnect', () => void stop(0));
process.on('message', (msg) => {
  if (msg?.cmd === 'shutdown') void stop(0);
  else if (msg?.cmd === 'memory') {
    if (msg.gc && typeof global.gc === 'function') {
      global.gc();
      global.gc();
    }
    process.send({
      type: 'memory',
      id: msg.id,
      gcAvailable: typeof global.gc === 'function',
      memory: process.memoryUsage(),
      active: coordinator?.lifecycle.activeCount ?? 0,
      pending: coordinator?.dispatcher.pendingCount ?? 0,
    });
  }
});

try {
  const heartbeat = process.env.BENCH_HEARTBEAT_SECONDS;
  const config = await loadConfig({
    // Only the variables the mesh needs: a developer's AMF_* settings must not change the bench.
    env: { HOME: tmpdir() },
    flags: {
      dataDir,
      logLevel: 'silent',
      coordinator: { port: 0, host: '127.0.0.1' },
      nats: { port: 0 },
      ...(heartbeat ? { heartbeat: { intervalSeconds: heartbeat } } : {}),
    },
  });
  coordinator = await Coordinator.start({ config });
  http = await startCoordinatorHttp(coordinator);
  const concurrency = Number(process.env.BENCH_WORKER_CONCURRENCY ?? 16);
  worker = await startWorker({
    name: 'bench-echo',
    tags: ['echo'],
    handler: echoHandler,
    natsUrl: coordinator.natsUrl,
    credential: coordinator.credentials.specialist,
    port: 0,
    heartbeatSeconds: config.heartbeat.intervalSeconds,
    concurrency,
  });
  const deadline = Date.now() + 15_000;
  while (!coordinator.registry.isLive(worker.worker.agentId)) {
    if (Date.now() > deadline) throw new Error('the echo worker was not admitted within 15 s');
    await new Promise((r) => setTimeout(r, 20));
  }
  // The floor: a plain NATS responder, same server, same role as the coordinator, no AMF code.
  responder = await connectAs(coordinator.natsUrl, coordinator.credentials.coordinator, 'bench-floor-responder');
  responder.subscribe(FLOOR_SUBJECT, {
    callback: (err, msg) => {
      if (!err) msg.respond(msg.data);
    },
  });
  await responder.flush();
  process.stdout.write(
    JSON.stringify({
      pid: process.pid,
      coordinatorUrl: http.url,
      workerUrl: worker.url,
      natsUrl: coordinator.natsUrl,
      // natsServer is private in the TypeScript API; its pid lets the parent make sure nothing is left.
      natsPid: coordinator.natsServer?.pid ?? null,
      dataDir,
      floorSubject: FLOOR_SUBJECT,
      workerConcurrency: concurrency,
    }) + '\n',
  );
} catch (err) {
  process.stderr.write(`meshServer: could not start the mesh: ${err?.stack ?? err}\n`);
  await stop(1);
}
