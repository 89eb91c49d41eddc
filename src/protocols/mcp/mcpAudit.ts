/**
 * The audit trail of federated MCP calls: one record per `tools/call` (allowed or denied) published
 * to the JetStream stream AMF_AUDIT on `amf.audit.mcp`, so every coordinator on the same NATS shares
 * it and it survives restarts. Records hold sizes, never argument values (they may be secrets).
 */
import { jetstream, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { AUDIT_STREAM } from '../../fabric/jetstream.js';

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
  /** How the coordinator authenticated to the agent: `none` (http), `tofu` (https pinned), `tls` (https, CA-verified), `spiffe` (bearer). */
  auth: 'none' | 'tofu' | 'tls' | 'spiffe';
  error?: string;
}

/** Writes and reads the MCP audit trail. */
export class McpAuditLog {
  private readonly js: JetStreamClient;
  /** Appends not yet acknowledged by JetStream; `recent()` waits for them. */
  private readonly pending = new Set<Promise<void>>();
  /** Records appended during this turn of the event loop, published together at its end. */
  private batch: Array<{ data: string; stored: () => void }> = [];

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    this.js = jetstream(nc);
  }

  /**
   * Appends a record; resolves once JetStream stored it (a failure is reported, never thrown). Callers
   * on the call path need not wait: the store acknowledgement is a NATS round trip that the MCP client
   * should not pay for, and `recent()` waits for appends still in flight, so a query made after a
   * call on this coordinator always sees it.
   */
  append(record: McpAuditRecord): Promise<void> {
    const done = new Promise<void>((stored) => {
      if (this.batch.length === 0) setImmediate(() => this.publishBatch());
      this.batch.push({ data: JSON.stringify(record), stored });
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
   * request/reply round trips the audit cost the coordinator and nats-server (issue 14).
   */
  private publishBatch(): void {
    const batch = this.batch;
    this.batch = [];
    const last = batch.pop();
    if (!last) return;
    try {
      for (const item of batch) this.nc.publish(MCP_AUDIT_SUBJECT, item.data);
    } catch (err) {
      this.onError(err);
    }
    void this.js
      .publish(MCP_AUDIT_SUBJECT, last.data)
      .then(
        () => undefined,
        (err: unknown) => this.onError(err),
      )
      .finally(() => {
        for (const item of batch) item.stored();
        last.stored();
      });
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
