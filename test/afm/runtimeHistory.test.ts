// Session history bounds: whole exchanges only, newest kept, within the message and character
// budgets, and always opening with a user message.
import { describe, expect, it } from 'vitest';
import { buildSystemPrompt, trimHistory } from '../../src/afm/runtime/index.js';
import { MAX_HISTORY_CHARS } from '../../src/afm/runtime/agentRuntime.js';
import type { ChatMessage } from '../../src/llm/types.js';

function exchanges(n: number, size = 10): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (let i = 0; i < n; i++) {
    out.push({ role: 'user', content: `q${i}`.padEnd(size, '.') });
    out.push({ role: 'assistant', content: `a${i}`.padEnd(size, '.') });
  }
  return out;
}

describe('trimHistory', () => {
  it('keeps the newest messages within the count', () => {
    const kept = trimHistory(exchanges(5), 4);
    expect(kept.map((m) => m.content.slice(0, 2))).toEqual(['q3', 'a3', 'q4', 'a4']);
  });

  it('never opens with an assistant message, even with an odd budget', () => {
    const kept = trimHistory(exchanges(3), 3);
    expect(kept[0]!.role).toBe('user');
    expect(kept.map((m) => m.content.slice(0, 2))).toEqual(['q2', 'a2']);
  });

  it('drops old exchanges once the character budget is spent', () => {
    const big = Math.floor(MAX_HISTORY_CHARS / 3);
    const kept = trimHistory(exchanges(3, big), 100);
    expect(kept.reduce((n, m) => n + m.content.length, 0)).toBeLessThanOrEqual(MAX_HISTORY_CHARS);
    expect(kept[0]!.role).toBe('user');
    expect(kept.at(-1)!.content.startsWith('a2')).toBe(true);
  });

  it('builds the system prompt from Role and Instructions', () => {
    expect(buildSystemPrompt('  A tutor.\n', '\nBe kind.\n')).toBe(
      '# Role\nA tutor.\n\n# Instructions\nBe kind.',
    );
  });
});
