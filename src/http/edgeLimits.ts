/**
 * The coordinator's and workers' limits against abusive clients, as configured: request deadlines
 * (slow headers or bodies) and the SSE hub's bounds, with the metrics that show them at work.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { AmfConfig } from '../config/config.js';
import type { RequestDeadlines } from './httpKit.js';
import type { EventStreamHub, EventStreamLimits } from './eventStream.js';

/** `http.headers_timeout_seconds` and `http.body_timeout_seconds` in milliseconds. */
export function requestDeadlines(config: AmfConfig): RequestDeadlines {
  return {
    headersTimeoutMs: config.http.headersTimeoutSeconds * 1000,
    bodyTimeoutMs: config.http.bodyTimeoutSeconds * 1000,
  };
}

/** `http.sse_max_clients` and `http.sse_max_buffered_bytes`. */
export function eventStreamLimits(config: AmfConfig): EventStreamLimits {
  return { maxClients: config.http.sseMaxClients, maxBufferedBytes: config.http.sseMaxBufferedBytes };
}

/** Gauges and counters of the SSE hub, read from it at scrape time. */
export function registerEventStreamMetrics(registry: Registry, hub: EventStreamHub): void {
  new Gauge({
    name: 'amf_sse_clients',
    help: 'Open GET /events streams',
    registers: [registry],
    collect() {
      this.set(hub.clientCount);
    },
  });
  new Gauge({
    name: 'amf_sse_clients_max',
    help: 'Most GET /events streams allowed at once (http.sse_max_clients)',
    registers: [registry],
    collect() {
      this.set(hub.maxClients);
    },
  });
  // Counters that only ever grow in the hub: the scrape copies the hub's running totals.
  new Counter({
    name: 'amf_sse_clients_dropped_total',
    help: 'GET /events clients disconnected because their unsent backlog reached http.sse_max_buffered_bytes',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(hub.dropped);
    },
  });
  new Counter({
    name: 'amf_sse_clients_refused_total',
    help: 'GET /events connections refused with 503 because http.sse_max_clients streams were open',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(hub.refused);
    },
  });
}
