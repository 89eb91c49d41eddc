/**
 * Resolves `--handler`: a built-in name (`echo`, `calc`) or the path of a module whose default export
 * is a WorkerHandler or a plain handler function.
 */
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
  const mod = (await import(pathToFileURL(resolve(spec)).href)) as { default?: unknown };
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
