// The MCP audit trail against a real nats-server: appends made in one burst (as concurrent calls
// make them) go out with one store acknowledgement per batch, yet every call keeps a record of its
// own, in order, and each append resolves only once its record is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { ensureFabricStores, AUDIT_STREAM } from '../../src/fabric/jetstream.js';
import { McpAuditLog, type McpAuditRecord } from '../../src/protocols/mcp/mcpAudit.js';
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
