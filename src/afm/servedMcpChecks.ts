/**
 * Cross-field rules of `x-amf.mcp` (what the agent serves over MCP): a resource has exactly one of
 * `text` / `file`, a `file` stays inside the AFM file's directory (checked again, symlinks included,
 * when it is read), URIs and prompt names are unique, and a template uses only declared arguments.
 */
import path from 'node:path';
import { promptTemplateArguments } from './mcpPromptTemplate.js';
import type { Report } from './semanticChecks.js';
import { toPointer } from './yamlLocator.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Why a resource `file` path may not be used, or undefined when it may (lexically). */
export function resourceFileProblem(file: string): string | undefined {
  if (path.isAbsolute(file) || /^[A-Za-z]:[\\/]/.test(file))
    return `file '${file}' must be relative to the AFM file's directory`;
  const normal = path.normalize(file);
  if (normal === '..' || normal.startsWith(`..${path.sep}`))
    return `file '${file}' is outside the AFM file's directory`;
  return undefined;
}

function checkResources(resources: unknown, report: Report): void {
  if (!Array.isArray(resources)) return;
  const firstByUri = new Map<string, number>();
  resources.forEach((resource: unknown, i) => {
    if (!isObj(resource)) return;
    const at = toPointer(['x-amf', 'mcp', 'resources', i]);
    if (typeof resource.uri === 'string') {
      const first = firstByUri.get(resource.uri);
      if (first !== undefined)
        report(
          `${at}/uri`,
          'error',
          `resource uri '${resource.uri}' is already used by x-amf.mcp.resources[${first}]`,
        );
      else firstByUri.set(resource.uri, i);
    }
    const hasText = resource.text !== undefined;
    const hasFile = resource.file !== undefined;
    if (hasText === hasFile)
      report(
        at,
        'error',
        `a resource needs exactly one of 'text' or 'file' (it has ${hasText ? 'both' : 'neither'})`,
      );
    if (typeof resource.file === 'string' && !resource.file.includes('${')) {
      const problem = resourceFileProblem(resource.file);
      if (problem) report(`${at}/file`, 'error', problem);
    }
  });
}

function checkPrompts(prompts: unknown, report: Report): void {
  if (!Array.isArray(prompts)) return;
  const firstByName = new Map<string, number>();
  prompts.forEach((prompt: unknown, i) => {
    if (!isObj(prompt)) return;
    const at = toPointer(['x-amf', 'mcp', 'prompts', i]);
    if (typeof prompt.name === 'string') {
      const first = firstByName.get(prompt.name);
      if (first !== undefined)
        report(
          `${at}/name`,
          'error',
          `prompt name '${prompt.name}' is already used by x-amf.mcp.prompts[${first}]`,
        );
      else firstByName.set(prompt.name, i);
    }
    const declared = new Set<string>();
    if (Array.isArray(prompt.arguments))
      prompt.arguments.forEach((arg: unknown, j) => {
        if (!isObj(arg) || typeof arg.name !== 'string') return;
        if (declared.has(arg.name))
          report(`${at}/arguments/${j}/name`, 'error', `argument '${arg.name}' is declared twice`);
        declared.add(arg.name);
      });
    if (typeof prompt.template !== 'string') return;
    const used = new Set<string>();
    for (const ref of promptTemplateArguments(prompt.template)) {
      used.add(ref.name);
      if (!declared.has(ref.name))
        report(
          `${at}/template`,
          'error',
          `${ref.source}: '${ref.name}' is not one of this prompt's arguments (declare it under arguments)`,
          { needle: ref.source },
        );
    }
    for (const name of declared)
      if (!used.has(name))
        report(`${at}/arguments`, 'note', `argument '${name}' is declared but the template never uses it`);
  });
}

/** Runs the rules of `x-amf.mcp`; `front` is the whole front matter (for `tools.mcp`). */
export function checkServedMcp(front: Obj, report: Report): void {
  const mesh = front['x-amf'];
  if (!isObj(mesh) || !isObj(mesh.mcp)) return;
  checkResources(mesh.mcp.resources, report);
  checkPrompts(mesh.mcp.prompts, report);
  const servers = isObj(front.tools) && Array.isArray(front.tools.mcp) ? front.tools.mcp : [];
  if (mesh.mcp.reexport_servers === true && servers.length === 0)
    report('/x-amf/mcp/reexport_servers', 'note', 'reexport_servers is on but tools.mcp lists no server');
}
