/**
 * Resolves `--handler`: a built-in name (`echo`, `calc`) or the path of a module whose default export
 * is a WorkerHandler or a plain handler function.
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { AmfError } from '../errors.js';
import { calcHandler } from '../worker/handlers/calc.js';
import { echoHandler } from '../worker/handlers/echo.js';
import type { TaskHandler, WorkerHandler } from '../worker/handlerApi.js';

export const BUILTIN_HANDLERS: Readonly<Record<string, WorkerHandler>> = Object.freeze({
  echo: echoHandler,
  calc: calcHandler,
});

/** Loads a handler by built-in name or module path. */
export async function loadHandler(spec: string): Promise<WorkerHandler> {
  const builtin = BUILTIN_HANDLERS[spec];
  if (builtin) return builtin;
  if (!/[/\\.]/.test(spec))
    throw new AmfError(
      'INVALID_REQUEST',
      `unknown handler "${spec}": use ${Object.keys(BUILTIN_HANDLERS).join(', ')} or a module path`,
    );
  const mod = await importHandlerModule(spec);
  const exported = mod.default;
  if (typeof exported === 'function')
    return { name: spec, description: `Handler from ${spec}`, handle: exported as TaskHandler };
  if (
    typeof exported === 'object' &&
    exported !== null &&
    typeof (exported as WorkerHandler).handle === 'function'
  ) {
    const h = exported as Partial<WorkerHandler> & { handle: TaskHandler };
    const schema = h.inputSchema as { type?: unknown } | undefined;
    if (schema !== undefined && (typeof schema !== 'object' || schema === null || schema.type !== 'object'))
      throw new AmfError('INVALID_REQUEST', `${spec}: inputSchema must be a JSON Schema with type "object"`);
    return {
      name: h.name ?? spec,
      description: h.description ?? `Handler from ${spec}`,
      handle: h.handle,
      ...(h.inputSchema ? { inputSchema: h.inputSchema } : {}),
      ...(h.readOnly === true ? { readOnly: true } : {}),
      ...(typeof h.mcp === 'object' && h.mcp !== null ? { mcp: h.mcp } : {}),
    };
  }
  throw new AmfError(
    'INVALID_REQUEST',
    `${spec} must export default a handler function or { name, description, handle }`,
  );
}

/**
 * Imports the handler module; a syntax error names the file, line and column with the line itself
 * (Node's own message for a module that does not parse has neither), any other failure the path.
 */
async function importHandlerModule(spec: string): Promise<{ default?: unknown }> {
  const file = resolve(spec);
  try {
    return (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof SyntaxError) throw new AmfError('INVALID_REQUEST', syntaxErrorAt(file, spec, message));
    throw new AmfError('INVALID_REQUEST', `cannot load handler ${spec} (${file}): ${message}`, undefined, {
      cause: err,
    });
  }
}

/** `spec:line:col: SyntaxError: …` plus the line and a caret, from `node --check` (only on failure). */
function syntaxErrorAt(file: string, spec: string, message: string): string {
  const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 10_000 });
  // node --check prints: `<file>:<line>`, the source line, a caret line, a blank line, the error.
  const lines = (check.stderr ?? '').split('\n');
  const at = lines.findIndex((l) => l.startsWith(`${file}:`));
  const lineNo = at >= 0 ? /:(\d+)$/.exec(lines[at]!)?.[1] : undefined;
  if (lineNo === undefined) return `${spec}: SyntaxError: ${message}`;
  const source = lines[at + 1] ?? '';
  const caret = lines[at + 2] ?? '';
  const column = caret.indexOf('^') + 1;
  return `${spec}:${lineNo}:${column > 0 ? column : 1}: SyntaxError: ${message}\n  ${source}\n  ${caret}`;
}
