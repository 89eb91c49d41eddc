/**
 * Matching a URI against an MCP resource template (RFC 6570 simple expansion, `{name}`, as MCP
 * servers use them): the variables of a match, or undefined. A variable stands for one or more
 * characters other than `/`, so `test://template/{id}/data` matches `test://template/123/data`.
 */
const VARIABLE = /\{([A-Za-z0-9_]+)\}/g;
const MAX_URI_LENGTH = 8192;

/** Compiled templates, kept small: templates come from a bounded set of agents. */
const compiled = new Map<string, { pattern: RegExp; names: string[] }>();

function compile(template: string): { pattern: RegExp; names: string[] } {
  const known = compiled.get(template);
  if (known) return known;
  const names: string[] = [];
  let source = '';
  let last = 0;
  for (const m of template.matchAll(VARIABLE)) {
    source += escape(template.slice(last, m.index));
    source += '([^/]+)';
    names.push(m[1]!);
    last = m.index + m[0].length;
  }
  source += escape(template.slice(last));
  const entry = { pattern: new RegExp(`^${source}$`), names };
  if (compiled.size > 4096) compiled.clear();
  compiled.set(template, entry);
  return entry;
}

function escape(literal: string): string {
  return literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The variables of `uri` under `template`, or undefined when it does not match. */
export function matchUriTemplate(template: string, uri: string): Record<string, string> | undefined {
  if (uri.length > MAX_URI_LENGTH) return undefined;
  const { pattern, names } = compile(template);
  const m = pattern.exec(uri);
  if (!m) return undefined;
  const vars: Record<string, string> = {};
  names.forEach((name, i) => {
    vars[name] = decodeURIComponentSafe(m[i + 1]!);
  });
  return vars;
}

function decodeURIComponentSafe(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
