/**
 * The MCP resources and prompts an AFM file declares (`x-amf.mcp`) as the handler MCP surface its
 * mesh worker serves on `/mcp` (the coordinator federates them like any worker's). A `file`
 * resource is read on every `resources/read`, so edits show without a restart; each read resolves
 * symlinks and refuses a target outside the AFM file's directory or over MAX_RESOURCE_FILE_BYTES.
 */
import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { AmfError } from '../../errors.js';
import type { HandlerMcpPrompt, HandlerMcpResource, HandlerMcpSurface } from '../../worker/handlerApi.js';
import { renderPromptTemplate } from '../mcpPromptTemplate.js';
import { resourceFileProblem } from '../servedMcpChecks.js';
import type { AfmDefinition, AfmMcpPrompt, AfmMcpResource } from '../types.js';

/** Largest resource file served. */
export const MAX_RESOURCE_FILE_BYTES = 1024 * 1024;

/** Media types served as text; any other type is sent as a base64 blob. */
const TEXT_TYPE = /^(text\/|application\/(json|yaml|xml|x-yaml|javascript)\b|[^/]+\/[^;]*\+(json|xml)\b)/i;

/**
 * Reads `file` (relative to `baseDir`) if it stays inside `baseDir` once symlinks are resolved.
 * Throws AmfError (INVALID_REQUEST / NOT_FOUND) with a sentence naming the file otherwise.
 */
export async function readResourceFile(baseDir: string, file: string): Promise<Buffer> {
  const lexical = resourceFileProblem(file);
  if (lexical) throw new AmfError('INVALID_REQUEST', lexical);
  const base = await realpath(baseDir);
  let target: string;
  try {
    target = await realpath(path.resolve(base, file));
  } catch {
    throw new AmfError('NOT_FOUND', `file '${file}' not found next to the AFM file (${base})`);
  }
  if (!target.startsWith(base + path.sep))
    throw new AmfError('INVALID_REQUEST', `file '${file}' is outside the AFM file's directory`);
  const st = await stat(target);
  if (!st.isFile()) throw new AmfError('INVALID_REQUEST', `file '${file}' is not a regular file`);
  if (st.size > MAX_RESOURCE_FILE_BYTES)
    throw new AmfError(
      'INVALID_REQUEST',
      `file '${file}' is ${st.size} bytes; the limit is ${MAX_RESOURCE_FILE_BYTES}`,
    );
  return readFile(target);
}

function servedResource(entry: AfmMcpResource, baseDir: string): HandlerMcpResource {
  const { uri, name, mimeType } = entry;
  return {
    resource: { uri, name, mimeType, ...(entry.description ? { description: entry.description } : {}) },
    async read() {
      if (entry.text !== undefined) return { contents: [{ uri, mimeType, text: entry.text }] };
      const bytes = await readResourceFile(baseDir, entry.file!);
      return {
        contents: [
          TEXT_TYPE.test(mimeType)
            ? { uri, mimeType, text: bytes.toString('utf8') }
            : { uri, mimeType, blob: bytes.toString('base64') },
        ],
      };
    },
  };
}

function servedPrompt(entry: AfmMcpPrompt): HandlerMcpPrompt {
  const description = entry.description ? { description: entry.description } : {};
  return {
    prompt: {
      name: entry.name,
      ...description,
      arguments: entry.arguments.map((a) => ({
        name: a.name,
        required: a.required,
        ...(a.description ? { description: a.description } : {}),
      })),
    },
    get: (args) =>
      Promise.resolve({
        ...description,
        messages: [
          { role: 'user', content: { type: 'text', text: renderPromptTemplate(entry.template, args) } },
        ],
      }),
  };
}

/**
 * The surface of `def`'s `x-amf.mcp` resources and prompts; undefined when it declares none. Every
 * `file` resource is read once here, so a missing or escaping file stops the agent at start with
 * the line it was declared on.
 */
export async function servedMcpSurface(def: AfmDefinition): Promise<HandlerMcpSurface | undefined> {
  const { resources, prompts } = def['x-amf'].mcp;
  if (resources.length === 0 && prompts.length === 0) return undefined;
  const baseDir = path.dirname(def.source.path);
  for (const [i, r] of resources.entries()) {
    if (r.file === undefined) continue;
    try {
      await readResourceFile(baseDir, r.file);
    } catch (err) {
      const at = def.source.position(`/x-amf/mcp/resources/${i}/file`);
      const where = at ? `${def.source.path}:${at.line}:${at.column}: ` : '';
      throw new AmfError(
        err instanceof AmfError ? err.code : 'INVALID_REQUEST',
        `${where}${(err as Error).message}`,
      );
    }
  }
  return {
    resources: resources.map((r) => servedResource(r, baseDir)),
    prompts: prompts.map(servedPrompt),
  };
}
