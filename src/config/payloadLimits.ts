/**
 * How large a task event the HTTP edge can cause, derived from the configured body caps, so the
 * spawned nats-server's `max_payload` is sized from the same numbers instead of a constant that the
 * caps silently outgrow (a 600 KB chat message used to fail with NATS' "max_payload exceeded").
 */
import type { AmfConfig } from './config.js';

/**
 * Room for everything around the request's text in an announcement: the CloudEvent envelope and
 * auth context, the payload's fixed fields, and per-message JSON (up to 1000 chat messages).
 */
export const TASK_EVENT_OVERHEAD_BYTES = 64 * 1024;

/** nats-server refuses a max_payload above its max_pending (64 MiB by default). */
export const NATS_MAX_PAYLOAD_CEILING = 64 * 1024 * 1024;

/** The largest request body any coordinator route that announces tasks accepts. */
export function largestTaskBodyBytes(config: AmfConfig): number {
  return Math.max(config.openai.maxBodyBytes, config.http.maxBodyBytes, config.tasks.maxTaskBytes);
}

/**
 * The largest task announcement an admitted request can produce. A chat request's text travels
 * twice (as `task`, the last user turn, and inside `messages`), and JSON re-encoding never makes a
 * string longer than it was in the request body, so twice the body plus the overhead is an upper
 * bound.
 */
export function largestTaskEventBytes(config: AmfConfig): number {
  return 2 * largestTaskBodyBytes(config) + TASK_EVENT_OVERHEAD_BYTES;
}

/**
 * The `max_payload` AMF gives the nats-server it spawns: `nats.max_payload_bytes`, raised to what
 * the body caps admit (so nothing the HTTP edge accepts is refused by NATS), within the server's
 * ceiling. Past the ceiling the coordinator refuses oversized tasks with 413 before recording them.
 */
export function spawnedNatsMaxPayload(config: AmfConfig): number {
  return Math.min(
    NATS_MAX_PAYLOAD_CEILING,
    Math.max(config.nats.maxPayloadBytes, largestTaskEventBytes(config)),
  );
}
