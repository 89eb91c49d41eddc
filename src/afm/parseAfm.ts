/**
 * The AFM parser and validator: file → every problem (with line and column) and, when there is no
 * error, the defaulted AfmDefinition. Order: split front matter and body, parse YAML 1.2 keeping node
 * positions, check and substitute static variables in string values, check the front matter against
 * its JSON Schema and the cross-field rules, read the `# Role` / `# Instructions` sections, build.
 * All problems are collected; nothing stops at the first one except a YAML syntax error (after which
 * the structure cannot be trusted, so only the body is still checked).
 */
import { readFile, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { LineCounter, isMap, isPair, isScalar, isSeq, parseDocument, type Document, type Node } from 'yaml';
import { AfmLoadError } from './afmErrors.js';
import { readBodySections } from './bodySections.js';
import { buildDefinition } from './buildDefinition.js';
import { checkFrontMatterSchema } from './schemaCheck.js';
import { checkSemantics, type Report } from './semanticChecks.js';
import { normaliseText, splitAfmSource } from './sourceSplit.js';
import { substituteStatic, type StaticSources, type VariableContext } from './staticVariables.js';
import { FrontMatterPositions, locate, toPointer } from './yamlLocator.js';
import type { AfmDefinition, AfmPosition, AfmProblem, AfmSeverity, AfmValidationResult } from './types.js';

/** Largest AFM file accepted. */
export const MAX_AFM_FILE_BYTES = 1024 * 1024;

/** How to treat static variables and where their values come from. */
export interface AfmParseOptions {
  /** Substitute `${env:…}`, `${file:…}`, `${secret:…}` (load) or only check them (validate). */
  readonly resolve: boolean;
  /** Environment for `env:` and `AMF_SECRET_*` (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Data directory for `secret:` files (default `$AMF_DATA_DIR` or `~/.amf`). */
  readonly dataDir?: string;
}

const PROMPT_POINTER = /^\/interfaces\/(\d+)\/prompt$/;
const MCP_PROMPT_POINTER = /^\/x-amf\/mcp\/prompts\/\d+\/template$/;

/** Parses and validates AFM text that came from `file` (used for the default name and `file:` paths). */
export function parseAfm(text: string, file: string, options: AfmParseOptions): AfmValidationResult {
  const problems: AfmProblem[] = [];
  const add = (severity: AfmSeverity, pos: AfmPosition, message: string, pointer?: string): void => {
    problems.push({
      severity,
      file,
      line: pos.line,
      column: pos.column,
      message,
      ...(pointer !== undefined ? { pointer } : {}),
    });
  };
  const env = options.env ?? process.env;
  const sources: StaticSources = {
    env,
    baseDir: path.dirname(path.resolve(file)),
    dataDir: options.dataDir ?? (env.AMF_DATA_DIR || path.join(homedir(), '.amf')),
  };

  if (!/\.afm(\.md)?$/i.test(file))
    add('error', { line: 1, column: 1 }, 'an AFM file must be named *.afm.md or *.afm (AFM 3)');
  const source = normaliseText(text);
  const parts = splitAfmSource(source);
  if (parts.unclosedFrontMatter) {
    add(
      'error',
      { line: 1, column: 1 },
      "front matter opened with '---' on line 1 is never closed by a '---' line",
    );
  }

  let front: Record<string, unknown> | undefined = {};
  let doc: Document | undefined;
  let positions: FrontMatterPositions | undefined;
  if (parts.frontMatter !== undefined) {
    const lineCounter = new LineCounter();
    const fmText = parts.frontMatter;
    const parsed = parseDocument(fmText, {
      lineCounter,
      version: '1.2',
      uniqueKeys: true,
      prettyErrors: false,
    });
    const pos = new FrontMatterPositions(lineCounter, parts.frontMatterLine);
    for (const err of parsed.errors) add('error', pos.at(err.pos[0]), `YAML: ${firstLine(err.message)}`);
    for (const warn of parsed.warnings) add('note', pos.at(warn.pos[0]), `YAML: ${firstLine(warn.message)}`);
    if (parsed.errors.length > 0) {
      front = undefined;
    } else if (parsed.contents !== null && !isMap(parsed.contents)) {
      add('error', pos.ofNode(parsed.contents as Node), 'front matter must be a mapping of keys to values');
      front = undefined;
    } else {
      doc = parsed;
      positions = pos;
      const report = makeReport(doc, fmText, pos, add);
      substituteScalars(doc, sources, options.resolve, report);
      front = toPlainObject(doc, pos, add);
      if (front) {
        for (const p of checkFrontMatterSchema(front))
          report(p.pointer, 'error', p.message, { atKey: p.atKey });
        checkSemantics(front, report);
      }
    }
  }

  // An unclosed front matter swallowed the body: its sections are not reported missing as well.
  const body = parts.unclosedFrontMatter ? { problems: [] } : readBodySections(parts.body, parts.bodyLine);
  for (const p of body.problems) add(p.severity, p, p.message);
  // Body variables are reported on the raw body (exact lines), then substituted per section.
  const bodyLines = lineStarts(parts.body);
  for (const p of substituteStatic(parts.body, 'body', sources, options.resolve).problems) {
    add(p.severity, offsetToPosition(bodyLines, p.offset, parts.bodyLine), p.message);
  }
  const role = substituteStatic(body.role?.text ?? '', 'body', sources, options.resolve).text;
  const instructions = substituteStatic(body.instructions?.text ?? '', 'body', sources, options.resolve).text;

  problems.sort((a, b) => a.line - b.line || a.column - b.column);
  if (problems.some((p) => p.severity === 'error') || !front) return { problems };
  const fmDoc = doc;
  const fmPos = positions;
  const definition = buildDefinition({
    front,
    role,
    instructions,
    source: {
      path: path.resolve(file),
      position(pointer) {
        if (!fmDoc || !fmPos) return undefined;
        const found = locate(fmDoc, pointer);
        return found.value || found.key ? fmPos.ofNode(found.value ?? found.key) : undefined;
      },
      ...(body.role ? { role_line: body.role.line } : {}),
      ...(body.instructions ? { instructions_line: body.instructions.line } : {}),
    },
  });
  return { definition, problems };
}

function firstLine(message: string): string {
  return message.split('\n')[0] ?? message;
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i += 1) if (text[i] === '\n') starts.push(i + 1);
  return starts;
}

function offsetToPosition(starts: readonly number[], offset: number, firstLine: number): AfmPosition {
  let line = 0;
  while (line + 1 < starts.length && (starts[line + 1] ?? Infinity) <= offset) line += 1;
  return { line: firstLine + line, column: offset - (starts[line] ?? 0) + 1 };
}

/** A Report that turns pointers (and needles inside string values) into file positions. */
function makeReport(
  doc: Document,
  fmText: string,
  pos: FrontMatterPositions,
  add: (severity: AfmSeverity, pos: AfmPosition, message: string, pointer?: string) => void,
): Report {
  return (pointer, severity, message, where) => {
    const found = locate(doc, pointer);
    const node = where?.atKey ? (found.key ?? found.nearest) : (found.value ?? found.nearest);
    let at = pos.ofNode(node);
    const range = node?.range;
    if (where?.needle && range) {
      const inside = fmText.slice(range[0], range[1]).indexOf(where.needle);
      if (inside >= 0) at = pos.at(range[0] + inside);
    }
    add(severity, at, message, pointer);
  };
}

/** The front matter as plain data; undefined (with the errors added) when it cannot be one. */
function toPlainObject(
  doc: Document,
  pos: FrontMatterPositions,
  add: (severity: AfmSeverity, pos: AfmPosition, message: string) => void,
): Record<string, unknown> | undefined {
  const complexKeys = findComplexKeys(doc.contents);
  for (const key of complexKeys)
    add('error', pos.ofNode(key), 'keys must be plain strings, not lists or mappings');
  if (complexKeys.length > 0) return undefined;
  try {
    return (doc.toJS({ maxAliasCount: 100 }) ?? {}) as Record<string, unknown>;
  } catch (err) {
    add('error', pos.ofNode(undefined), `YAML: ${(err as Error).message}`);
    return undefined;
  }
}

/** Keys that are lists or mappings (`? [a]`): JSON has no such keys, so they are refused. */
function findComplexKeys(node: unknown): Node[] {
  const found: Node[] = [];
  const visit = (n: unknown): void => {
    if (isMap(n)) {
      for (const pair of n.items) {
        if (isPair(pair) && pair.key !== null && !isScalar(pair.key)) found.push(pair.key as Node);
        if (isPair(pair)) visit(pair.value);
      }
    } else if (isSeq(n)) n.items.forEach(visit);
  };
  visit(node);
  return found;
}

/** Checks (and with `resolve` substitutes) static variables in every string value of the front matter. */
function substituteScalars(doc: Document, sources: StaticSources, resolve: boolean, report: Report): void {
  const webhookIndexes = new Set<number>();
  const interfaces = doc.get('interfaces', true);
  if (isSeq(interfaces)) {
    interfaces.items.forEach((item, i) => {
      if (isMap(item) && item.get('type') === 'webhook') webhookIndexes.add(i);
    });
  }
  const visit = (node: unknown, segments: (string | number)[]): void => {
    if (isMap(node)) {
      for (const pair of node.items) {
        if (isPair(pair) && isScalar(pair.key)) visit(pair.value, [...segments, String(pair.key.value)]);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => visit(item, [...segments, i]));
    } else if (isScalar(node) && typeof node.value === 'string' && node.value.includes('${')) {
      const pointer = toPointer(segments);
      const prompt = PROMPT_POINTER.exec(pointer);
      const context: VariableContext =
        prompt && webhookIndexes.has(Number(prompt[1]))
          ? 'prompt'
          : MCP_PROMPT_POINTER.test(pointer)
            ? 'mcpPrompt'
            : 'value';
      const result = substituteStatic(node.value, context, sources, resolve);
      for (const p of result.problems) report(pointer, p.severity, p.message, { needle: p.source });
      if (resolve) node.value = result.text;
    }
  };
  visit(doc.contents, []);
}

/** Reads and validates an AFM file without resolving variables (what `amf validate` does). */
export async function validateAfmFile(
  file: string,
  options: Omit<AfmParseOptions, 'resolve'> = {},
): Promise<AfmValidationResult> {
  const text = await readAfmText(file);
  if (typeof text !== 'string') return { problems: [text] };
  return parseAfm(text, file, { ...options, resolve: false });
}

/** Reads, validates and resolves an AFM file for running; throws AfmLoadError with every problem. */
export async function loadAfmFile(
  file: string,
  options: Omit<AfmParseOptions, 'resolve'> = {},
): Promise<AfmDefinition> {
  const text = await readAfmText(file);
  if (typeof text !== 'string') throw new AfmLoadError([text]);
  const result = parseAfm(text, file, { ...options, resolve: true });
  if (!result.definition) throw new AfmLoadError(result.problems);
  return result.definition;
}

async function readAfmText(file: string): Promise<string | AfmProblem> {
  const problem = (message: string): AfmProblem => ({ severity: 'error', file, line: 1, column: 1, message });
  try {
    const st = await stat(file);
    if (!st.isFile()) return problem('not a regular file');
    if (st.size > MAX_AFM_FILE_BYTES)
      return problem(`file is ${st.size} bytes; the limit is ${MAX_AFM_FILE_BYTES}`);
    return await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return problem(code === 'ENOENT' ? 'file not found' : `cannot read the file: ${(err as Error).message}`);
  }
}
