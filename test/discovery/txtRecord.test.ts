// TXT records of _amf-agent._tcp: mapping from AgentRecord, encoding limits, and decoding that
// measures and flags instead of refusing (RFC 6763 section 6, AMF SPEC v0.2 section 2).
import { describe, expect, it } from 'vitest';
import { AmfError } from '../../src/errors.js';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { MAX_TXT_BYTES } from '../../src/discovery/advertisement.js';
import {
  agentRecordToTxt,
  coordinatorTxt,
  decodeTxt,
  encodeTxt,
  txtSize,
} from '../../src/discovery/txtRecord.js';

const record: AgentRecord = {
  agent_id: 'spiffe://local/worker/4f1c',
  endpoint: 'http://127.0.0.1:8766',
  protocols_supported: ['A2A/1.0', 'MCP/2025-11-25'],
  capability_tags: ['text-summarize', 'code-review'],
  trust_domain: 'local',
  visibility: 'local',
  version: '1.2.3',
  status: 'active',
  card_url: 'http://127.0.0.1:8766/.well-known/agent-card.json',
  mcp_endpoint: 'http://127.0.0.1:8766/mcp',
};

describe('agentRecordToTxt', () => {
  it('maps every field to its short key, lists comma-separated', () => {
    expect(agentRecordToTxt(record)).toEqual({
      id: 'spiffe://local/worker/4f1c',
      ep: 'http://127.0.0.1:8766',
      proto: 'A2A/1.0,MCP/2025-11-25',
      tags: 'text-summarize,code-review',
      td: 'local',
      vis: 'local',
      v: '1.2.3',
      status: 'active',
      card: 'http://127.0.0.1:8766/.well-known/agent-card.json',
      mcp: 'http://127.0.0.1:8766/mcp',
    });
  });

  it('omits absent fields and empty lists', () => {
    const txt = agentRecordToTxt({
      agent_id: 'a',
      endpoint: 'http://h',
      protocols_supported: [],
      capability_tags: [],
    });
    expect(txt).toEqual({ id: 'a', ep: 'http://h' });
  });

  it('refuses a list item that contains a comma', () => {
    expect(() => agentRecordToTxt({ ...record, capability_tags: ['a,b'] })).toThrow(/contains a comma/);
  });

  it('adds role=coordinator for the coordinator', () => {
    expect(coordinatorTxt(record)).toMatchObject({
      role: 'coordinator',
      id: record.agent_id,
      ep: record.endpoint,
    });
  });
});

describe('encodeTxt / decodeTxt', () => {
  it('round-trips key=value strings and measures the wire size', () => {
    const txt = agentRecordToTxt(record);
    const buffers = encodeTxt(txt);
    expect(buffers.map((b) => b.toString())).toContain('proto=A2A/1.0,MCP/2025-11-25');
    const decoded = decodeTxt(buffers);
    expect(decoded).toEqual({
      txt,
      invalidUtf8: false,
      bytes: txtSize(buffers),
      duplicateKeys: [],
    });
    expect(decoded.bytes).toBe(buffers.reduce((n, b) => n + 1 + b.length, 0));
  });

  it('keeps UTF-8 values intact and counts bytes, not characters', () => {
    const buffers = encodeTxt({ id: 'agënt-✓' });
    expect(txtSize(buffers)).toBe(1 + Buffer.byteLength('id=agënt-✓'));
    expect(decodeTxt(buffers).txt).toEqual({ id: 'agënt-✓' });
  });

  it('accepts exactly 512 bytes and refuses 513', () => {
    // Two strings of 202 bytes (203 on the wire each), then one that fills the record to `total`.
    const at = (total: number) => ({
      a: 'x'.repeat(200),
      b: 'x'.repeat(200),
      c: 'x'.repeat(total - 2 * 203 - 1 - 'c='.length),
    });
    const ok = encodeTxt(at(MAX_TXT_BYTES));
    expect(txtSize(ok)).toBe(MAX_TXT_BYTES);
    let error: unknown;
    try {
      encodeTxt(at(MAX_TXT_BYTES + 1));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(AmfError);
    expect((error as AmfError).code).toBe('PAYLOAD_TOO_LARGE');
    expect((error as AmfError).message).toMatch(/513 bytes.*at most 512/);
  });

  it('refuses a single string over 255 bytes and keys RFC 6763 does not allow', () => {
    expect(() => encodeTxt({ k: 'v'.repeat(254) })).toThrow(/at most 255/);
    expect(() => encodeTxt({ '': 'v' })).toThrow(/printable ASCII/);
    expect(() => encodeTxt({ 'a=b': 'v' })).toThrow(/without "="/);
    expect(() => encodeTxt({ ké: 'v' })).toThrow(/printable ASCII/);
    expect(() => encodeTxt({ ID: 'a', id: 'b' })).toThrow(/appears twice/);
  });

  it('detects invalid UTF-8 and delivers U+FFFD in its place', () => {
    const bad = Buffer.concat([Buffer.from('id=ab'), Buffer.from([0xff, 0xfe]), Buffer.from('c')]);
    const decoded = decodeTxt([bad, Buffer.from('ep=http://h')]);
    expect(decoded.invalidUtf8).toBe(true);
    expect(decoded.txt.id).toBe('ab\uFFFD\uFFFDc');
    expect(decoded.txt.ep).toBe('http://h');
    expect(decoded.bytes).toBe(1 + bad.length + 1 + 'ep=http://h'.length);
  });

  it('lowercases keys, keeps the first of repeated keys and lists the duplicates', () => {
    const decoded = decodeTxt(
      ['ID=first', 'id=second', 'Ep=x', 'EP=y', 'tags=a,b'].map((s) => Buffer.from(s)),
    );
    expect(decoded.txt).toEqual({ id: 'first', ep: 'x', tags: 'a,b' });
    expect(decoded.duplicateKeys.sort()).toEqual(['ep', 'id']);
  });

  it('treats a key without "=" as an empty value and skips strings without a key', () => {
    const decoded = decodeTxt(['flag', '=orphan', '', 'v=1=2'].map((s) => Buffer.from(s)));
    expect(decoded.txt).toEqual({ flag: '', v: '1=2' });
  });

  it('never lets a __proto__ key touch the prototype', () => {
    const decoded = decodeTxt([Buffer.from('__proto__=polluted'), Buffer.from('id=a')]);
    expect(Object.getPrototypeOf(decoded.txt)).toBe(Object.prototype);
    expect(Object.keys(decoded.txt)).toEqual(['__proto__', 'id']);
    expect(Object.getOwnPropertyDescriptor(decoded.txt, '__proto__')?.value).toBe('polluted');
  });

  it('measures an empty record as zero bytes', () => {
    expect(txtSize(encodeTxt({}))).toBe(0);
    expect(decodeTxt([]).bytes).toBe(0);
  });
});
