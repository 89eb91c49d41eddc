// The conversation as the Messages API wants it: tool results inside user turns, roles alternating,
// a user turn first, and broken tool arguments never crashing the conversion.
import { describe, expect, it } from 'vitest';
import { toAnthropicMessages } from '../../src/llm/anthropicChatModel.js';

describe('toAnthropicMessages', () => {
  it('groups parallel tool results into one user turn and merges a following user message into it', () => {
    const wire = toAnthropicMessages([
      { role: 'user', content: 'q' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 't1', name: 'a', arguments: '{"x":1}' },
          { id: 't2', name: 'b', arguments: '{"x": ' },
        ],
      },
      { role: 'tool', toolCallId: 't1', name: 'a', content: 'one', isError: false },
      { role: 'tool', toolCallId: 't2', name: 'b', content: 'bad args', isError: true },
      { role: 'user', content: 'and now?' },
    ]);
    expect(wire.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(wire[1]!.content).toEqual([
      { type: 'tool_use', id: 't1', name: 'a', input: { x: 1 } },
      // Arguments that are not JSON are sent as an empty input; the tool result already said why.
      { type: 'tool_use', id: 't2', name: 'b', input: {} },
    ]);
    expect(wire[2]!.content).toEqual([
      { type: 'tool_result', tool_use_id: 't1', content: 'one', is_error: false },
      { type: 'tool_result', tool_use_id: 't2', content: 'bad args', is_error: true },
      { type: 'text', text: 'and now?' },
    ]);
  });

  it('opens with a user turn even when the history starts with the assistant', () => {
    const wire = toAnthropicMessages([
      { role: 'assistant', content: 'Hello, how can I help?' },
      { role: 'user', content: 'hi' },
    ]);
    expect(wire.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
  });

  it('keeps an empty assistant turn as a placeholder rather than an empty content list', () => {
    const wire = toAnthropicMessages([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: '' },
      { role: 'user', content: 'again' },
    ]);
    expect(wire[1]!.content).toEqual([{ type: 'text', text: '(no answer)' }]);
  });
});
