/**
 * Maps JSON Pointers of front-matter values back to their YAML nodes and from there to lines and
 * columns of the AFM file (the front matter starts a few lines into the file).
 */
import { isMap, isPair, isScalar, isSeq, type Document, type LineCounter, type Node } from 'yaml';
import type { AfmPosition } from './types.js';

/** Splits a JSON Pointer (`/a/0/b~1c`) into its unescaped segments. */
export function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** Joins segments into a JSON Pointer. */
export function toPointer(segments: readonly (string | number)[]): string {
  return segments.map((s) => `/${String(s).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

/** A located value: its key node (for map entries) and value node. */
export interface Located {
  readonly key?: Node;
  readonly value?: Node;
  /** The deepest node found on the way (when the pointer goes further than the YAML does). */
  readonly nearest: Node | undefined;
}

/** Finds the YAML nodes of the value at `pointer`. */
export function locate(doc: Document, pointer: string): Located {
  let node: unknown = doc.contents;
  let key: Node | undefined;
  let nearest = (doc.contents ?? undefined) as Node | undefined;
  for (const segment of pointerSegments(pointer)) {
    key = undefined;
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === segment);
      if (!pair) return { nearest };
      key = pair.key as Node;
      node = pair.value;
      nearest = (pair.value as Node | null) ?? key;
    } else if (isSeq(node)) {
      node = node.items[Number(segment)];
      if (node === undefined) return { nearest };
      nearest = node as Node;
    } else {
      return { nearest };
    }
  }
  return { ...(key ? { key } : {}), ...(node ? { value: node as Node } : {}), nearest };
}

/** Converts offsets inside the front matter to file positions. */
export class FrontMatterPositions {
  constructor(
    private readonly lineCounter: LineCounter,
    /** File line of the first front-matter line. */
    private readonly firstLine: number,
  ) {}

  /** File position of an offset in the front-matter text. */
  at(offset: number): AfmPosition {
    const { line, col } = this.lineCounter.linePos(offset);
    return { line: line + this.firstLine - 1, column: col };
  }

  /** File position of a node's start, or of the front matter's start when there is no node. */
  ofNode(node: Node | undefined): AfmPosition {
    const start = node?.range?.[0];
    return start === undefined ? { line: this.firstLine, column: 1 } : this.at(start);
  }
}
