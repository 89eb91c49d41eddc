/**
 * Templates of the MCP prompts an agent serves (`x-amf.mcp.prompts[].template`): `${arg:NAME}` is
 * replaced by the argument the client sent (an optional argument left out becomes empty text), and
 * `$${` writes a literal `${`. Static variables (`${env:…}`, …) were already substituted at load.
 */
import { scanVariables } from './staticVariables.js';

/** The `${arg:…}` references of a template, as written (the needle of a line-numbered error). */
export function promptTemplateArguments(template: string): { name: string; source: string }[] {
  return scanVariables(template)
    .filter((ref) => ref.prefix === 'arg')
    .map((ref) => ({ name: ref.name.trim(), source: ref.source }));
}

/** The prompt text for `args`; references to arguments not given become empty text. */
export function renderPromptTemplate(template: string, args: Readonly<Record<string, string>>): string {
  let out = '';
  let last = 0;
  const literal = (segment: string): string => segment.replace(/\$\$\{/g, '${');
  for (const ref of scanVariables(template)) {
    if (ref.prefix !== 'arg') continue;
    const name = ref.name.trim();
    out += literal(template.slice(last, ref.offset)) + (Object.hasOwn(args, name) ? (args[name] ?? '') : '');
    last = ref.offset + ref.source.length;
  }
  return out + literal(template.slice(last));
}
