/**
 * The tables the CLI prints for people (`amf agents`, `amf audit`): a header row in capitals, then
 * one row per item, columns padded to their widest cell and two spaces apart, as kubectl prints
 * them. The last column is not padded, so a long value (a URL) costs no trailing blanks. Scripts
 * use `-o json` instead: a table's layout may change, JSON's fields do not.
 */

/** Which way a column's cells are padded. */
export type Align = 'left' | 'right';

/** A column: its header and how its cells line up (default left). */
export interface Column {
  header: string;
  align?: Align;
}

/** The table as text, one line per row, header first, ending with a newline. */
export function formatTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const cells = [columns.map((c) => c.header), ...rows];
  const widths = columns.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const last = columns.length - 1;
  return cells
    .map((row) =>
      columns
        .map((column, i) => {
          const cell = row[i] ?? '';
          if (column.align === 'right') return cell.padStart(widths[i]!);
          return i === last ? cell : cell.padEnd(widths[i]!);
        })
        .join('  '),
    )
    .join('\n')
    .concat('\n');
}
