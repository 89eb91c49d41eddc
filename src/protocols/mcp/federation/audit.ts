/**
 * The audit trail of federated MCP calls: one record per `tools/call` (allowed or denied) published
 * to the JetStream stream AMF_AUDIT on `amf.audit.mcp`, so every coordinator on the same NATS shares
 * it and it survives restarts. Records hold sizes, never argument values (they may be secrets).
 */
import { jetstream, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { randomUUID } from 'node:crypto';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { AUDIT_STREAM } from '../../../fabric/jetstream.js';
import { AmfError } from '../../../errors.js';

/** Subject of MCP call audit records. */
export const MCP_AUDIT_SUBJECT = 'amf.audit.mcp';
/** Upper bound of `GET /audit?limit=N` (each record is one JetStream read). */
export const MAX_AUDIT_QUERY = 500;

/** One audited MCP call. */
export interface McpAuditRecord {
  kind: 'mcp.call';
  /** What was reached when not a tool: `resource` (read, subscribe), `prompt` or `completion`. */
  capability?: 'resource' | 'prompt' | 'completion';
  /** ISO time the call arrived. */
  time: string;
  /** Who called (remote address of the MCP client's session). */
  caller: string;
  /** MCP session of the caller. */
  session_id: string | null;
  /** The federated wire name that was called. */
  wire_name: string;
  /** AMF name `<agent_id>/<tool>`, null when the wire name matched no tool. */
  tool: string | null;
  agent_id: string | null;
  decision: 'allow' | 'deny';
  /** Policy deny reasons (or `unknown_tool`, `mcp_tls_pin_mismatch`). */
  reasons: string[];
  /** `ok`, `tool_error` (the agent's tool returned isError), `denied`, `failed` (forwarding failed). */
  outcome: 'ok' | 'tool_error' | 'denied' | 'failed';
  duration_ms: number;
  argument_bytes: number;
  /**
   * How the coordinator authenticated to the agent: `none` (http), `bearer` (http with the
   * coordinator's signed bearer: the agent knows the coordinator, not the other way round), `tofu`
   * (https pinned), `tls` (https, CA-verified), `spiffe` (JWT-SVID bearer).
   */
  auth: 'none' | 'bearer' | 'tofu' | 'tls' | 'spiffe';
  error?: string;
}

/**
 * Waits before each new try of a batch whose store acknowledgement failed: about 30 s in all, well
 * inside JetStream's default duplicate window (2 min), so a record stored before the failure is
 * recognised by its message id and not stored twice.
 */
const DEFAULT_RETRY_DELAYS_MS = [250, 1_000, 2_000, 4_000, 8_000, 15_000];

/** One record on its way to the stream. */
interface PendingRecord {
  data: string;
  /** Nats-Msg-Id: the stream drops a second copy within its duplicate window. */
  msgId: string;
  stored: () => void;
}

/** Writes and reads the MCP audit trail. */
export class McpAuditLog {
  private readonly js: JetStreamClient;
  /** Appends not yet acknowledged by JetStream; `recent()` waits for them. */
  private readonly pending = new Set<Promise<void>>();
  /** Records appended during this turn of the event loop, published together at its end. */
  private batch: PendingRecord[] = [];
  private readonly idPrefix = `${randomUUID()}-`;
  private nextId = 0;
  private readonly retryDelaysMs: readonly number[];
  private readonly onLost: (record: string, err: unknown) => void;

  /**
   * `onError` is told of every failed store attempt; `onLost` of each record still not stored after
   * the last retry (the coordinator logs it whole, so it survives in the log at least).
   */
  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly onError: (err: unknown) => void = () => undefined,
    options: { retryDelaysMs?: readonly number[]; onLost?: (record: string, err: unknown) => void } = {},
  ) {
    this.js = jetstream(nc);
    this.retryDelaysMs = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
    this.onLost = options.onLost ?? (() => undefined);
  }

  /**
   * Appends a record; resolves once JetStream stored it, or once it was given up after the last
   * retry (reported to `onLost`, never thrown). Callers on the call path need not wait: the store
   * acknowledgement is a NATS round trip that the MCP client should not pay for, and `recent()`
   * waits for appends still in flight, so a query made after a call on this coordinator sees it.
   */
  append(record: McpAuditRecord): Promise<void> {
    const done = new Promise<void>((stored) => {
      if (this.batch.length === 0) setImmediate(() => this.publishBatch());
      this.batch.push({ data: JSON.stringify(record), msgId: this.idPrefix + ++this.nextId, stored });
    });
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
    return done;
  }

  /**
   * One record per message as before, but one store acknowledgement per batch: the records before
   * the last go out as plain publishes (the stream captures its subject either way) and the last as
   * a JetStream publish. The server stores one connection's messages in order, so the last one's
   * acknowledgement covers the whole batch. Under concurrent calls this saves most of the
   * request/reply round trips the audit cost the coordinator and nats-server (issue 14). When the
   * acknowledgement fails, the whole batch is tried again record by record (retry()).
   */
  private publishBatch(): void {
    const batch = this.batch;
    this.batch = [];
    const last = batch[batch.length - 1];
    if (!last) return;
    try {
      for (const item of batch)
        if (item !== last) this.nc.publish(MCP_AUDIT_SUBJECT, item.data, withId(item));
    } catch (err) {
      this.onError(err);
    }
    this.js.publish(MCP_AUDIT_SUBJECT, last.data, { msgID: last.msgId }).then(
      () => {
        for (const item of batch) item.stored();
      },
      (err: unknown) => {
        this.onError(err);
        this.retry(batch, 0);
      },
    );
  }

  /** Each record of `batch` again with its own acknowledgement, after the `attempt`-th delay. */
  private retry(batch: PendingRecord[], attempt: number): void {
    const delay = this.retryDelaysMs[attempt];
    if (delay === undefined) {
      for (const item of batch) {
        this.onLost(item.data, new AmfError('UNAVAILABLE', 'not stored after the last retry'));
        item.stored();
      }
      return;
    }
    setTimeout(() => {
      void Promise.all(
        batch.map((item) =>
          this.js.publish(MCP_AUDIT_SUBJECT, item.data, { msgID: item.msgId }).then(
            () => {
              item.stored();
              return undefined;
            },
            (err: unknown) => {
              this.onError(err);
              return item;
            },
          ),
        ),
      ).then((outcomes) => {
        const left = outcomes.filter((o): o is PendingRecord => o !== undefined);
        if (left.length > 0) this.retry(left, attempt + 1);
      });
    }, delay).unref();
  }

  /** Resolves once every append made so far is stored (or reported as failed). */
  async flush(): Promise<void> {
    await Promise.all([...this.pending]);
  }

  /** The newest `limit` records, newest first (limit clamped to 1..MAX_AUDIT_QUERY). */
  async recent(limit: number): Promise<McpAuditRecord[]> {
    const n = Math.max(1, Math.min(MAX_AUDIT_QUERY, Math.floor(limit) || 1));
    await this.flush();
    const info = await this.jsm.streams.info(AUDIT_STREAM);
    const { first_seq: first, last_seq: last } = info.state;
    const out: McpAuditRecord[] = [];
    // Walk back from the last sequence; deleted or expired sequences read as null and are skipped.
    for (let seq = last; seq >= first && seq > 0 && out.length < n; seq--) {
      const msg = await this.jsm.streams.getMessage(AUDIT_STREAM, { seq }).catch(() => null);
      if (msg) out.push(msg.json<McpAuditRecord>());
    }
    return out;
  }
}

/** Publish options carrying the record's message id. */
function withId(item: PendingRecord): { headers: ReturnType<typeof headers> } {
  const h = headers();
  h.set('Nats-Msg-Id', item.msgId);
  return { headers: h };
}
