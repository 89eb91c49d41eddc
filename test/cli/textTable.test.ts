// The CLI's tables: a header row, columns aligned, the last column unpadded, right-aligned numbers.
import { describe, expect, it } from 'vitest';
import { formatTable } from '../../src/cli/textTable.js';

describe('formatTable', () => {
  it('prints the header first and pads every column but the last to its widest cell', () => {
    const text = formatTable(
      [{ header: 'STATUS' }, { header: 'MS', align: 'right' }, { header: 'ENDPOINT' }],
      [
        ['live', '5', 'http://127.0.0.1:1'],
        ['offline', '1234', 'http://x'],
      ],
    );
    expect(text).toBe(
      ['STATUS     MS  ENDPOINT', 'live        5  http://127.0.0.1:1', 'offline  1234  http://x', ''].join(
        '\n',
      ),
    );
  });
});
