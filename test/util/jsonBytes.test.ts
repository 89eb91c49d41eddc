import { describe, expect, it } from 'vitest';
import { jsonBytes } from '../../src/util/jsonBytes.js';

describe('jsonBytes', () => {
  it('gives the bytes TextEncoder gives, for non-ASCII text and lone surrogates too', () => {
    const values = [
      { text: 'Grüße, 世界 🌍', n: -0, list: [1, 'two', null] },
      'a lone surrogate \ud800 becomes U+FFFD',
      'x'.repeat(10_000),
    ];
    for (const value of values)
      expect(Buffer.compare(jsonBytes(value), new TextEncoder().encode(JSON.stringify(value)))).toBe(0);
  });

  it('never hands two messages the same bytes: a later message cannot change an earlier one', () => {
    const first = jsonBytes({ n: 1 });
    const copy = Buffer.from(first);
    for (let i = 0; i < 1000; i++) jsonBytes({ n: i, pad: 'y'.repeat(i % 50) });
    expect(first.equals(copy)).toBe(true);
  });
});
