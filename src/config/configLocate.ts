/**
 * Where a value (or key) of the configuration sits in its YAML file, for problem messages. A module
 * of its own so that yaml is loaded only when there is a file to read (start-up time, issue 14).
 */
import { isMap, isScalar, type Document, type LineCounter } from 'yaml';

/** One segment of a path into the configuration: a key or a list index. */
type Seg = string | number;

/** Where a value (or key) sits in the parsed YAML document, when it can be found. */
export function locate(
  doc: Document,
  lines: LineCounter,
  at: Seg[],
  isKey: boolean,
): { offset: number; line: number; col: number } | undefined {
  let offset: number | undefined;
  if (isKey && at.length > 0) {
    const parent = at.length === 1 ? doc.contents : doc.getIn(at.slice(0, -1), true);
    if (isMap(parent)) {
      const last = String(at[at.length - 1]);
      const pair = parent.items.find((p) => isScalar(p.key) && String(p.key.value) === last);
      offset = pair && isScalar(pair.key) ? pair.key.range?.[0] : undefined;
      // A missing required key has no position: point at the mapping that lacks it.
      if (offset === undefined) offset = parent.range?.[0];
    }
  } else {
    const node = at.length === 0 ? doc.contents : doc.getIn(at, true);
    offset = (node as { range?: [number, number, number] } | undefined)?.range?.[0];
  }
  if (offset === undefined) return undefined;
  return { offset, ...lines.linePos(offset) };
}
