// The MCP audit trail against a real nats-server: appends made in one burst (as concurrent calls
// make them) go out with one store acknowledgement per batch, yet every call keeps a record of its
// own, in order, and each append resolves only once its record is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { ensureFabricStores, AUDIT_STREAM } from '../../src/fabric/jetstream.js';
import { McpAuditLog, type McpAuditRecord } from '../../src/protocols/mcp/federation/audit.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

function record(i: number): McpAuditRecord {
  return {
    kind: 'mcp.call',
    time: new Date(0).toISOString(),
    caller: '127.0.0.1',
    session_id: null,
    wire_name: `echo-${i}`,
    tool: `spiffe://local/worker/echo/echo`,
    agent_id: 'spiffe://local/worker/echo',
    decision: 'allow',
    reasons: [],
    outcome: 'ok',
    duration_ms: 1,
    argument_bytes: i,
    auth: 'none',
  };
}

describe('McpAuditLog', () => {
  let nats: TestNats;
  let audit: McpAuditLog;
  const errors: unknown[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    const nc = await nats.connect('coordinator');
    await ensureFabricStores(nc);
    audit = new McpAuditLog(nc, await jetstreamManager(nc), (err) => errors.push(err));
  });
  afterAll(async () => {
    await nats?.close();
  });

  it('stores one record per call for a burst of appends, in order, each append resolving once stored', async () => {
    const jsm = await jetstreamManager(await nats.connect('coordinator', 'test-reader'));
    const before = (await jsm.streams.info(AUDIT_STREAM)).state.messages;
    // 40 appends in one turn of the event loop, as 40 concurrent tools/call answers would make them.
    const appends = Array.from({ length: 40 }, (_, i) => audit.append(record(i)));
    await Promise.all(appends);
    // Resolved means stored: the stream holds all 40 without waiting any further.
    expect((await jsm.streams.info(AUDIT_STREAM)).state.messages - before).toBe(40);
    const newest = await audit.recent(40);
    expect(newest.map((r) => r.wire_name)).toEqual(Array.from({ length: 40 }, (_, i) => `echo-${39 - i}`));
    expect(errors).toEqual([]);
  });

  it('appends in separate turns are each stored (a batch of one)', async () => {
    for (let i = 100; i < 103; i++) await audit.append(record(i));
    const newest = await audit.recent(3);
    expect(newest.map((r) => r.wire_name)).toEqual(['echo-102', 'echo-101', 'echo-100']);
  });
});

// A store acknowledgement that fails (here: the stream is gone, so JetStream has no responder) is
// not the end of the record: the batch is tried again until the stream takes it, and a record given
// up after the last retry is handed to onLost whole (the coordinator logs it), never dropped silently.
describe('McpAuditLog when JetStream does not acknowledge', () => {
  let nats: TestNats;
  afterAll(async () => {
    await nats?.close();
  });

  it('stores a record once the stream is back, exactly once, and hands over a record it gives up', async () => {
    nats = await startTestNats();
    const nc = await nats.connect('coordinator');
    await ensureFabricStores(nc);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(AUDIT_STREAM);
    const errors: unknown[] = [];
    let sawError!: () => void;
    const firstError = new Promise<void>((resolve) => (sawError = resolve));
    const audit = new McpAuditLog(
      nc,
      jsm,
      (err) => {
        errors.push(err);
        sawError();
      },
      { retryDelaysMs: [50, 100, 200, 400, 800, 1600, 3200] },
    );
    const appended = audit.append(record(7));
    await firstError;
    await ensureFabricStores(nc);
    await appended;
    expect(errors.length).toBeGreaterThan(0);
    const stored = await audit.recent(10);
    expect(stored.filter((r) => r.wire_name === 'echo-7')).toHaveLength(1);
    expect((await jsm.streams.info(AUDIT_STREAM)).state.messages).toBe(1);

    await jsm.streams.delete(AUDIT_STREAM);
    const lost: string[] = [];
    const givingUp = new McpAuditLog(nc, jsm, () => undefined, {
      retryDelaysMs: [10, 10],
      onLost: (text) => lost.push(text),
    });
    await givingUp.append(record(8));
    expect(lost).toHaveLength(1);
    expect(JSON.parse(lost[0]!)).toMatchObject({ wire_name: 'echo-8', kind: 'mcp.call' });
  });
});
