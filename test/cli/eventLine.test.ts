// `amf events` lines: one short line per event, the summary chosen by type, read defensively.
import { describe, expect, it } from 'vitest';
import { formatEventLine, isHeartbeatEvent } from '../../src/cli/eventLine.js';

const TASK = '3f2a9c1e-0000-4000-8000-000000000001';

function event(type: string, payload: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    specversion: '1.0',
    id: 'e1',
    type,
    source: 'urn:amf:coordinator',
    time: '2026-01-02T03:04:05.678Z',
    data: { payload, auth_context: { identity: 'spiffe://local/coordinator' } },
    ...extra,
  };
}

/** The columns after the time: type, task, agent, summary. */
function columns(line: string): string[] {
  return line.split(/ {2,}/).slice(1);
}

describe('formatEventLine', () => {
  it('starts with the local time to the millisecond', () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    const two = (n: number) => String(n).padStart(2, '0');
    const line = formatEventLine(
      event('amf.task.claim', { task_id: TASK, agent_id: 'spiffe://local/worker/a' }),
    );
    expect(
      line.startsWith(`${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.678  `),
    ).toBe(true);
  });

  it.each([
    [
      'amf.task.announce',
      { task_id: TASK, task: 'summarize this', required_capability: 'summarize', attempt: 2 },
      'coordinator',
      'summarize: "summarize this" (attempt 2)',
    ],
    [
      'amf.task.claim',
      { task_id: TASK, agent_id: 'spiffe://local/worker/summarizer' },
      'summarizer',
      'claimed',
    ],
    [
      'amf.result.final',
      {
        task_id: TASK,
        agent_id: 'spiffe://local/worker/summarizer',
        status: 'completed',
        result: { text: 'done\nhere' },
      },
      'summarizer',
      'completed: "done\\nhere"',
    ],
    [
      'amf.result.final',
      {
        task_id: TASK,
        agent_id: 'spiffe://local/worker/summarizer',
        status: 'failed',
        error: { code: 'handler_error', message: 'the handler failed: look up task' },
      },
      'summarizer',
      'failed: handler_error: the handler failed: look up task',
    ],
    [
      'amf.result.partial',
      { task_id: TASK, agent_id: 'spiffe://local/worker/s', seq: 3, delta: 'par' },
      's',
      '#3 "par"',
    ],
    [
      'amf.policy.warning',
      {
        task_id: TASK,
        reason: 'task_expired',
        message: 'no answer in 30 s',
        terminal: true,
        state: 'expired',
      },
      'coordinator',
      'task_expired: no answer in 30 s (task expired)',
    ],
    [
      'amf.task.progress',
      { task_id: TASK, agent_id: 'spiffe://local/worker/s', percent: 40, message: 'reading' },
      's',
      '40% "reading"',
    ],
  ])('%s: agent and summary', (type, payload, agent, summary) => {
    const [t, task, who, text] = columns(formatEventLine(event(type, payload, { amftaskid: TASK })));
    expect(t).toBe(type);
    expect(task).toBe('3f2a9c1e');
    expect(who).toBe(agent);
    expect(text).toBe(summary);
  });

  it('names the admitted agent of an advertisement, with its tags and endpoint, and no task', () => {
    const line = formatEventLine(
      event('amf.discovery.capability.advertise', {
        agent_id: 'spiffe://local/worker/upper',
        endpoint: 'http://127.0.0.1:41234',
        capability_tags: ['upper', 'text'],
        change: 'admitted',
      }),
    );
    expect(columns(line)).toEqual([
      'amf.discovery.capability.advertise',
      '-',
      'upper',
      'admitted [upper,text] at http://127.0.0.1:41234',
    ]);
  });

  it('cuts long texts, keeps one line, and never throws on odd events', () => {
    const line = formatEventLine(
      event('amf.task.announce', { task_id: TASK, task: 'x'.repeat(5000), required_capability: 'echo' }),
    );
    expect(line.length).toBeLessThan(200);
    expect(line).toContain('…');
    for (const odd of [
      null,
      42,
      'text',
      {},
      { type: 7, data: 'no' },
      { type: 'amf.result.final', data: { payload: null } },
    ])
      expect(formatEventLine(odd)).not.toContain('\n');
  });

  it('shows an artifact or any other payload as compact JSON', () => {
    const [, , , text] = columns(formatEventLine(event('amf.evidence.publish', { note: 'x' })));
    expect(text).toBe(JSON.stringify('{"note":"x"}'));
  });
});

describe('isHeartbeatEvent', () => {
  it('is true for heartbeats only', () => {
    expect(isHeartbeatEvent(event('amf.discovery.agent.heartbeat', {}))).toBe(true);
    expect(isHeartbeatEvent(event('amf.task.claim', {}))).toBe(false);
    expect(isHeartbeatEvent(undefined)).toBe(false);
  });
});
