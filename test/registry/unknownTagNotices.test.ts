// The refusal warnings are bounded per window: a client looping on a wrong model cannot flood the
// fabric, and the next warning says how many were left out.
import { describe, expect, it } from 'vitest';
import { UnknownTagNotices } from '../../src/registry/unknownTagNotices.js';
import type { PolicyPayload } from '../../src/events/payloads.js';

describe('UnknownTagNotices', () => {
  it('warns at most perWindow times per window and counts the rest', () => {
    const sent: PolicyPayload[] = [];
    let now = 0;
    const notices = new UnknownTagNotices({ warn: (p) => void sent.push(p) }, 2, 1000, () => now);
    for (let i = 0; i < 5; i++)
      notices.refused({ protocol: 'openai', requested: `amf/x${i}`, message: 'no' });
    expect(sent.map((p) => p.details?.requested)).toEqual(['amf/x0', 'amf/x1']);
    now = 1000;
    notices.refused({ protocol: 'a2a', requested: 'tag y'.padEnd(500, 'y'), message: 'no' });
    expect(sent).toHaveLength(3);
    expect(sent[2]!.details).toMatchObject({ protocol: 'a2a', suppressed_before: 3 });
    expect((sent[2]!.details!.requested as string).length).toBe(200);
    expect(sent[2]!.reason).toBe('no_agent_for_tag');
  });
});
