/**
 * The system under test for `npm run bench`, in a process of its own so that the load generator's
 * memory and CPU do not pollute the coordinator's numbers.
 *
 * Starts a coordinator (which spawns its own nats-server on a random port), its HTTP edge, the
 * built-in echo worker (tag `echo`), a raw NATS responder on `bench.floor` (the request/reply floor:
 * it answers every request with the bytes it was sent) and a bare node:http server (calibration: no
 * AMF code at all). When everything is up it prints ONE JSON line on stdout:
 *
 *   {"pid":..,"coordinatorUrl":"http://127.0.0.1:..","workerUrl":"http://127.0.0.1:..","bareUrl":..,
 *    "natsUrl":"nats://127.0.0.1:..","natsPid":..,"workerPid":..,"dataDir":"/tmp/amf-bench-..",
 *    "floorSubject":"bench.floor"}
 *
 * NATS passwords are not printed: they are in `<dataDir>/credentials.json` (mode 0600).
 *
 * With BENCH_SEPARATE_WORKER=1 the echo worker runs in a process of its own (this script with the
 * argument `worker`, as `amf worker` would), so the coordinator process holds only the coordinator;
 * `workerPid` is then that process. By default the worker shares the coordinator's process, as with
 * `amf up --demo`.
 *
 * Control, when started with an IPC channel (as bench/run.js does): `{cmd: 'memory', gc: true, id}`
 * is answered with `{type: 'memory', id, memory: process.memoryUsage(), rssRightAfterGc, active, pending}`
 * 100 ms after a full GC (start with --expose-gc); `rssRightAfterGc` is the RSS read at once, before
 * the malloc trim that follows a full GC. The process shuts everything down and exits on SIGTERM, SIGINT, when
 * the IPC channel closes (the parent died) or on `{cmd: 'shutdown'}`.
 *
 * Standalone: `node --expose-gc bench/meshServer.js` (Ctrl-C to stop).
 *
 * Environment: BENCH_WORKER_CONCURRENCY (echo worker's handler concurrency, default 16 as in
 * `amf worker`), BENCH_HEARTBEAT_SECONDS (default: the configuration default, 5),
 * BENCH_SEPARATE_WORKER (see above).
 */
import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Posts a message to the parent process over the IPC channel `fork` opened.
 * @param {unknown} message
 */
const send = (message) => {
  if (!process.send) throw new Error('no IPC channel: this script runs as a forked child');
  process.send(message);
};

const DIST = new URL('../dist/', import.meta.url);
if (!existsSync(new URL('coordinator/coordinator.js', DIST))) {
  process.stderr.write('meshServer: dist/ is missing: run `npm run build` first\n');
  process.exit(2);
}

const FLOOR_SUBJECT = 'bench.floor';
const WORKER_CONCURRENCY = Number(process.env.BENCH_WORKER_CONCURRENCY ?? 16);
const quietly = (p) => Promise.resolve(p).catch(() => undefined);
const { startWorker } = await import(new URL('apps/workerApp.js', DIST).href);
const { echoHandler } = await import(new URL('worker/handlers/echo.js', DIST).href);
const { startMemoryTrimmer } = await import(new URL('util/memoryTrimmer.js', DIST).href);
// As `amf up` and `amf worker` do: malloc's free pages go back to the system after full GCs.
const trimmer = startMemoryTrimmer();

if (process.argv[2] === 'worker') await runWorkerProcess();
else await runMeshProcess();

/** Worker-only mode: waits for `{cmd: 'start', natsUrl, join, heartbeatSeconds, coordinatorKey, operatorKey}` on IPC. */
async function runWorkerProcess() {
  let running;
  let stopping;
  const stop = () => {
    stopping ??= (async () => {
      await quietly(running?.close(5000));
      if (process.connected) process.disconnect();
      process.exit(0);
    })();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.on('disconnect', stop);
  process.on('message', async (/** @type {any} */ msg) => {
    if (msg?.cmd === 'shutdown') return stop();
    if (msg?.cmd !== 'start') return;
    try {
      running = await startWorker({
        name: 'bench-echo',
        tags: ['echo'],
        handler: echoHandler,
        natsUrl: msg.natsUrl,
        join: msg.join,
        coordinatorKey: msg.coordinatorKey,
        operatorKey: msg.operatorKey,
        port: 0,
        heartbeatSeconds: msg.heartbeatSeconds,
        concurrency: WORKER_CONCURRENCY,
      });
      send({ type: 'ready', url: running.url, agentId: running.worker.agentId });
    } catch (err) {
      send({ type: 'error', message: String(/** @type {any} */ (err)?.stack ?? err) });
    }
  });
}

async function runMeshProcess() {
  const { loadConfig } = await import(new URL('config/config.js', DIST).href);
  const { Coordinator } = await import(new URL('coordinator/coordinator.js', DIST).href);
  const { startCoordinatorHttp } = await import(new URL('apps/coordinatorApp.js', DIST).href);
  const { connectAs } = await import(new URL('fabric/connect.js', DIST).href);

  const dataDir = await mkdtemp(join(tmpdir(), 'amf-bench-'));
  let coordinator;
  let http;
  let worker; // { url, agentId, close() }
  let responder;
  let bare;
  let stopping;

  const stop = (code = 0) => {
    stopping ??= (async () => {
      await quietly(worker?.close());
      await quietly(responder?.close());
      if (bare) {
        const closed = new Promise((resolve) => bare.close(resolve));
        bare.closeAllConnections();
        await quietly(closed);
      }
      await quietly(http?.close());
      await quietly(coordinator?.close());
      await quietly(rm(dataDir, { recursive: true, force: true }));
      if (process.connected) process.disconnect();
      process.exit(code);
    })();
    return stopping;
  };

  process.once('SIGTERM', () => void stop(0));
  process.once('SIGINT', () => void stop(0));
  process.on('disconnect', () => void stop(0));
  process.on('message', (/** @type {any} */ msg) => {
    if (msg?.cmd === 'shutdown') void stop(0);
    else if (msg?.cmd === 'memory') {
      if (msg.gc && typeof global.gc === 'function') {
        global.gc();
        global.gc();
      }
      // Before the trim that follows a full GC has run: the report shows both.
      const rssRightAfterGc = process.memoryUsage.rss();
      // Read 100 ms later: what the process does after a full GC (the trim above, in the thread pool,
      // 5–10 ms) is done, as it would be by the time anyone looks at a coordinator's memory.
      setTimeout(
        () =>
          send({
            type: 'memory',
            id: msg.id,
            gcAvailable: typeof global.gc === 'function',
            memory: process.memoryUsage(),
            rssRightAfterGc,
            active: coordinator?.lifecycle.activeCount ?? 0,
            pending: coordinator?.dispatcher.pendingCount ?? 0,
          }),
        100,
      );
    }
  });

  try {
    const heartbeat = process.env.BENCH_HEARTBEAT_SECONDS;
    const config = await loadConfig({
      // Only what the mesh needs: a developer's AMF_* settings must not change the bench.
      // AMF_NATS_SERVER_BIN is the one exception: bench/run.js reports that server's version.
      env: {
        HOME: tmpdir(),
        ...(process.env.AMF_NATS_SERVER_BIN ? { AMF_NATS_SERVER_BIN: process.env.AMF_NATS_SERVER_BIN } : {}),
      },
      flags: {
        dataDir,
        logLevel: 'silent',
        coordinator: { port: 0, host: '127.0.0.1' },
        nats: { port: 0 },
        // One load generator on 127.0.0.1 is one client: the per-client limit (default 1000/s) would
        // measure the limiter, not the mesh. A limit it never reaches keeps the limiter's cost counted.
        http: { rateLimitPerSecond: 1_000_000, rateLimitBurst: 1_000_000 },
        ...(heartbeat ? { heartbeat: { intervalSeconds: heartbeat } } : {}),
      },
    });
    // The admission benchmarks' advertisers connect as the shared specialist user, which the
    // spawned server carries only when asked for. The echo worker joins as `amf worker` does: the
    // join credential, then its own NATS user once admitted (the task path users get).
    coordinator = await Coordinator.start({ config, legacySpecialistUser: true });
    http = await startCoordinatorHttp(coordinator);
    const workerOptions = {
      natsUrl: coordinator.natsUrl,
      join: coordinator.joinCredential,
      heartbeatSeconds: config.heartbeat.intervalSeconds,
      // Its edge takes the operator key (the direct path's requests carry it) and the coordinator's bearer.
      coordinatorKey: coordinator.signingKey.publicKey,
      operatorKey: http.operatorKey,
    };
    worker =
      process.env.BENCH_SEPARATE_WORKER === '1'
        ? await startSeparateWorker(workerOptions)
        : await startInProcessWorker(workerOptions);
    const deadline = Date.now() + 15_000;
    while (!coordinator.registry.isLive(worker.agentId)) {
      if (Date.now() > deadline) throw new Error('the echo worker was not admitted within 15 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    // The floor: a plain NATS responder, same server, same role as the coordinator, no AMF code.
    responder = await connectAs(
      coordinator.natsUrl,
      coordinator.credentials.coordinator,
      'bench-floor-responder',
    );
    responder.subscribe(FLOOR_SUBJECT, {
      callback: (err, msg) => {
        if (!err) msg.respond(msg.data);
      },
    });
    await responder.flush();
    // Calibration: a bare node:http server (no AMF code) answering every POST with a small JSON
    // body: the most any HTTP service can do against this load generator on this machine.
    const bareBody = Buffer.from(JSON.stringify({ status: 'completed', result: { text: 'ok' } }));
    bare = createServer((req, res) => {
      req.on('data', () => undefined);
      req.on('end', () => {
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': bareBody.length,
        });
        res.end(bareBody);
      });
    });
    bare.keepAliveTimeout = 65_000;
    await new Promise((resolve) => bare.listen(0, '127.0.0.1', resolve));
    process.stdout.write(
      JSON.stringify({
        pid: process.pid,
        coordinatorUrl: http.url,
        workerUrl: worker.url,
        bareUrl: `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (bare.address()).port}`,
        natsUrl: coordinator.natsUrl,
        // natsServer is private in the TypeScript API; its pid lets the parent make sure nothing is left.
        natsPid: coordinator.natsServer?.pid ?? null,
        workerPid: worker.pid,
        dataDir,
        floorSubject: FLOOR_SUBJECT,
        workerConcurrency: WORKER_CONCURRENCY,
        memoryTrimming: trimmer.description,
        // What the flags above change from the defaults, for the reports to print.
        nonDefaults: {
          'http.rate_limit_per_second': '1000000 (default 1000): one load generator is one client',
          'http.rate_limit_burst': '1000000 (default 2000)',
          log_level: 'silent (default info)',
          ...(heartbeat ? { 'heartbeat.interval_seconds': `${heartbeat} (default 5)` } : {}),
        },
      }) + '\n',
    );
  } catch (err) {
    process.stderr.write(`meshServer: could not start the mesh: ${/** @type {any} */ (err)?.stack ?? err}\n`);
    await stop(1);
  }
}

async function startInProcessWorker({ natsUrl, join, heartbeatSeconds, coordinatorKey, operatorKey }) {
  const w = await startWorker({
    name: 'bench-echo',
    tags: ['echo'],
    handler: echoHandler,
    natsUrl,
    join,
    coordinatorKey,
    operatorKey,
    port: 0,
    heartbeatSeconds,
    concurrency: WORKER_CONCURRENCY,
  });
  return { url: w.url, agentId: w.worker.agentId, pid: process.pid, close: () => w.close(5000) };
}

async function startSeparateWorker(options) {
  const child = fork(fileURLToPath(import.meta.url), ['worker'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: process.execArgv.filter((a) => !a.startsWith('--cpu-prof')),
  });
  const ready = await new Promise((resolve, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`worker process exited (${signal ?? code})`)));
    child.on('message', (/** @type {any} */ msg) => {
      if (msg?.type === 'ready') resolve(msg);
      else if (msg?.type === 'error') reject(new Error(msg.message));
    });
    child.send({ cmd: 'start', ...options });
  });
  return {
    url: ready.url,
    agentId: ready.agentId,
    pid: child.pid,
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
