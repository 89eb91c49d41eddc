/**
 * Prometheus metrics of a coordinator, on a registry of its own (two coordinators in one process, as
 * in tests, do not collide). Counters are fed from lifecycle and HTTP hooks, gauges read live state at
 * scrape time so they cost nothing between scrapes.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { AgentDirectory } from '../registry/agentDirectory.js';
import type { FabricHealth } from './coordinatorOptions.js';
import type { TaskService } from './tasks/taskService.js';

/** What the metrics read: the tasks, the agents and the fabric's health, never the whole Coordinator. */
export interface MetricsSources {
  tasks: Pick<TaskService, 'activeCount' | 'onTerminal'>;
  agents: Pick<AgentDirectory, 'list'>;
  fabricHealth: () => FabricHealth;
}

export class CoordinatorMetrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'route' | 'status'>;
  readonly tasksFinished: Counter<'tag' | 'state'>;
  readonly taskDuration: Histogram<'state'>;

  constructor(sources: MetricsSources) {
    collectDefaultMetrics({ register: this.registry, prefix: 'amf_process_' });
    this.httpRequests = new Counter({
      name: 'amf_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['route', 'status'],
      registers: [this.registry],
    });
    this.tasksFinished = new Counter({
      name: 'amf_tasks_finished_total',
      help: 'Tasks that reached a terminal state, by tag and state',
      labelNames: ['tag', 'state'],
      registers: [this.registry],
    });
    this.taskDuration = new Histogram({
      name: 'amf_task_duration_seconds',
      help: 'Time from announcement to terminal state',
      labelNames: ['state'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [this.registry],
    });
    new Gauge({
      name: 'amf_tasks_active',
      help: 'Tasks in flight',
      registers: [this.registry],
      collect() {
        this.set(sources.tasks.activeCount);
      },
    });
    new Gauge({
      name: 'amf_agents',
      help: 'Registered agents by status',
      labelNames: ['status'],
      registers: [this.registry],
      collect() {
        const counts = { live: 0, offline: 0, unverified: 0, pending: 0 };
        for (const a of sources.agents.list()) counts[a.status]++;
        for (const [status, count] of Object.entries(counts)) this.set({ status }, count);
      },
    });
    new Gauge({
      name: 'amf_nats_connected',
      help: '1 while the coordinator is connected to NATS, 0 during an outage',
      registers: [this.registry],
      collect() {
        this.set(sources.fabricHealth().connected ? 1 : 0);
      },
    });
    new Gauge({
      name: 'amf_nats_server_restarts',
      help: 'Times the spawned nats-server was restarted after dying (absent with --nats-url)',
      registers: [this.registry],
      collect() {
        const server = sources.fabricHealth().server;
        if (server) this.set(server.restarts);
      },
    });
    sources.tasks.onTerminal(({ task, state, durationMs }) => {
      if (!task.owned) return;
      this.tasksFinished.inc({ tag: task.tag, state });
      this.taskDuration.observe({ state }, durationMs / 1000);
    });
  }
}
