/**
 * A whole mesh for a test: a coordinator that spawns its own nats-server (the real supervisor path),
 * its HTTP edge on a random port, workers on demand, an observer connection that records every event,
 * and one close() that stops it all and removes the temp data dir.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { loadConfig, type AmfConfig, type ConfigOverrides } from '../../src/config/config.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import type { AmfEvent } from '../../src/events/cloudEvent.js';
import { connectAs } from '../../src/fabric/connect.js';
import type { NatsRole } from '../../src/fabric/credentials.js';
import { startCoordinatorHttp, type CoordinatorHttp } from '../../src/apps/coordinatorApp.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import type { LogFn } from '../../src/log.js';
import type { HandlerTimeouts } from '../../src/worker/handlerTimeout.js';

export interface ObservedEvent {
  subject: string;
  event: AmfEvent;
}

export interface TestMesh {
  config: AmfConfig;
  coordinator: Coordinator;
  http: CoordinatorHttp;
  /** Base URL of the coordinator's HTTP edge. */
  url: string;
  /** The operator key: the configured `coordinator.apiKey`, else the one generated into the data dir. */
  operatorKey: string;
  /** `extra` plus `Authorization: Bearer <operator key>`, for the operator routes. */
  operatorHeaders(extra?: Record<string, string>): Record<string, string>;
  /** fetch of `path` (e.g. `/agents`) on the coordinator as the operator; headers in `init` are kept. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** Every `amf.>` event seen on the fabric so far (observer connection, coordinator role). */
  events: ObservedEvent[];
  startWorker(
    name: string,
    tags: string[],
    handler: WorkerHandler,
    extra?: {
      concurrency?: number;
      heartbeatSeconds?: number;
      log?: LogFn;
      handlerTimeouts?: HandlerTimeouts;
    },
  ): Promise<RunningWorker>;
  connect(role: NatsRole, name?: string): Promise<NatsConnection>;
  /** Resolves with the first observed event matching `predicate` (past or future), or rejects at the deadline. */
  waitForEvent(
    predicate: (e: ObservedEvent) => boolean,
    timeoutMs?: number,
    what?: string,
  ): Promise<ObservedEvent>;
  /** Polls `check` until it returns a truthy value or the deadline passes. */
  waitFor<T>(
    check: () => T | undefined | false | Promise<T | undefined | false>,
    timeoutMs?: number,
    what?: string,
  ): Promise<T>;
  close(): Promise<void>;
}

export interface TestMeshOptions {
  config?: ConfigOverrides;
  /** The coordinator's environment (identity mode, SPIFFE socket); default process.env. */
  env?: NodeJS.ProcessEnv;
  /**
   * Keep the legacy `specialist` NATS user (default true: many tests stand in for seed agents or
   * inject events with it). False tests the product default: no such user with legacy mode off.
   */
  legacySpecialistUser?: boolean;
}

/** Starts a coordinator with its own nats-server and HTTP edge on random ports. */
export async function startTestMesh(options: TestMeshOptions = {}): Promise<TestMesh> {
  const dataDir = await mkdtemp(join(tmpdir(), 'amf-mesh-test-'));
  const overrides = (options.config ?? {}) as Record<string, unknown>;
  const config = await loadConfig({
    env: { HOME: tmpdir() },
    flags: {
      ...overrides,
      dataDir,
      logLevel: 'silent',
      coordinator: { port: 0, ...((overrides.coordinator as object | undefined) ?? {}) },
      nats: { port: 0, ...((overrides.nats as object | undefined) ?? {}) },
      heartbeat: {
        intervalSeconds: 1,
        offlineAfterMissed: 3,
        ...((overrides.heartbeat as object | undefined) ?? {}),
      },
      // Test files share one network namespace: mDNS stays off unless a test turns it on, so meshes
      // of parallel test files cannot discover each other's workers.
      mdns: { enabled: false, ...((overrides.mdns as object | undefined) ?? {}) },
    } as ConfigOverrides,
  });
  const coordinator = await Coordinator.start({
    config,
    ...(options.env ? { env: options.env } : {}),
    legacySpecialistUser: options.legacySpecialistUser ?? true,
  });
  const http = await startCoordinatorHttp(coordinator);
  const connections: NatsConnection[] = [];
  const workers: RunningWorker[] = [];
  const events: ObservedEvent[] = [];
  const waiters = new Set<{
    predicate: (e: ObservedEvent) => boolean;
    resolve: (e: ObservedEvent) => void;
  }>();
  const observer = await connectAs(coordinator.natsUrl, coordinator.credentials.coordinator, 'test-observer');
  connections.push(observer);
  observer.subscribe('amf.>', {
    callback: (err, msg) => {
      if (err) return;
      let event: AmfEvent;
      try {
        event = msg.json<AmfEvent>();
      } catch {
        return;
      }
      // Only AMF events are recorded; tests also send raw sentinel messages.
      if (typeof event !== 'object' || event === null || typeof event.data !== 'object') return;
      const observed = { subject: msg.subject, event };
      events.push(observed);
      for (const w of waiters) {
        if (w.predicate(observed)) {
          waiters.delete(w);
          w.resolve(observed);
        }
      }
    },
  });
  await observer.flush();
  let closing: Promise<void> | undefined;

  const mesh: TestMesh = {
    config,
    coordinator,
    http,
    url: http.url,
    operatorKey: http.operatorKey,
    events,
    operatorHeaders(extra = {}) {
      return { ...extra, authorization: `Bearer ${http.operatorKey}` };
    },
    fetch(path, init = {}) {
      const headers = new Headers(init.headers);
      if (!headers.has('authorization')) headers.set('authorization', `Bearer ${http.operatorKey}`);
      return fetch(new URL(path, http.url), { ...init, headers });
    },
    async startWorker(name, tags, handler, extra = {}) {
      const w = await startWorker({
        name,
        tags,
        handler,
        natsUrl: coordinator.natsUrl,
        // Joins as agents do: the join credential, then its own nkey user once admitted.
        join: coordinator.joinCredential,
        // Whom its edge trusts, as a worker on the coordinator's machine reads them from the data dir.
        coordinatorKey: coordinator.signingKey.publicKey,
        operatorKey: http.operatorKey,
        port: 0,
        heartbeatSeconds: extra.heartbeatSeconds ?? 1,
        ...(extra.concurrency !== undefined ? { concurrency: extra.concurrency } : {}),
        ...(extra.handlerTimeouts ? { handlerTimeouts: extra.handlerTimeouts } : {}),
        ...(extra.log ? { log: extra.log } : {}),
      });
      workers.push(w);
      await mesh.waitFor(
        () => coordinator.registry.isLive(w.worker.agentId),
        10_000,
        `worker ${name} admitted`,
      );
      return w;
    },
    async connect(role, name = `test-${role}`) {
      const nc = await connectAs(coordinator.natsUrl, coordinator.credentials[role], name, {
        maxReconnectAttempts: 0,
      });
      connections.push(nc);
      return nc;
    },
    waitForEvent(predicate, timeoutMs = 10_000, what = 'event') {
      const seen = events.find(predicate);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = {
          predicate,
          resolve: (e: ObservedEvent) => {
            clearTimeout(timer);
            resolve(e);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    async waitFor(check, timeoutMs = 10_000, what = 'condition') {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const value = await check();
        if (value) return value as never;
        if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close() {
      closing ??= (async () => {
        await Promise.allSettled(workers.map((w) => w.close(5000)));
        await http.close();
        await coordinator.close();
        await Promise.allSettled(connections.map((nc) => nc.close()));
        await rm(dataDir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
  return mesh;
}

/** Events of `type` about task `taskId` seen so far. */
/**
 * Events of task `taskId` as the mesh records them, on shared subjects. An agent's own submission on
 * `amf.internal.task.<key>.*` is left out: the coordinator records it again on the shared subject,
 * so counting both would count each event twice.
 */
export function eventsFor(mesh: TestMesh, taskId: string, type?: string): ObservedEvent[] {
  return mesh.events.filter(
    (e) =>
      !e.subject.startsWith('amf.internal.') &&
      (e.event.amftaskid === taskId || (e.event.data.payload as { task_id?: string }).task_id === taskId) &&
      (!type || e.event.type === type),
  );
}

/**
 * Waits until task `taskId` has a terminal event, then until everything the coordinator published
 * before now has reached the observer (a sentinel on the coordinator's own connection), and returns
 * the terminal events seen: a second terminal event from the coordinator could not hide.
 */
export async function settledTerminalEvents(mesh: TestMesh, taskId: string): Promise<ObservedEvent[]> {
  await mesh.waitFor(() => terminalEventsFor(mesh, taskId).length > 0, 10_000, `terminal event of ${taskId}`);
  const sentinel = `amf.test.sentinel.${taskId}`;
  const seen = mesh.waitForEvent((e) => e.subject === sentinel, 5000, 'sentinel');
  mesh.coordinator.nc.publish(sentinel, JSON.stringify({ data: { payload: {} } }));
  await seen;
  return terminalEventsFor(mesh, taskId);
}

/** Terminal events of a task on canonical subjects (a final result, or a terminal notice). */
export function terminalEventsFor(mesh: TestMesh, taskId: string): ObservedEvent[] {
  return eventsFor(mesh, taskId).filter(
    (e) =>
      e.event.type === 'amf.result.final' ||
      (e.event.data.payload as { terminal?: boolean }).terminal === true,
  );
}
