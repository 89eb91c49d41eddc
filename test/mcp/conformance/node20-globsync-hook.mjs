// Node 20 compatibility for @modelcontextprotocol/conformance@0.1.16, whose bundle imports
// `globSync` from node:fs (added in Node 22). Only its results-aggregation path calls it, never the
// server scenarios these tests run; this load hook removes that one named import so the bundle can
// link on Node 20, and the function throws if it is ever reached.
export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (!url.includes('/@modelcontextprotocol/conformance/dist/') || result.format !== 'module') return result;
  const source = String(result.source);
  if (!source.includes('globSync as ')) return result;
  const match = /globSync as ([A-Za-z_$][\w$]*),/.exec(source);
  if (!match) return result;
  const patched =
    source.replace(match[0], '') +
    `\nfunction ${match[1]}(){throw new Error('fs.globSync needs Node 22');}\n`;
  return { ...result, source: patched };
}
