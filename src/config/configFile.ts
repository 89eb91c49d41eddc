/**
 * The file layer of the configuration: `amf.yaml` read with a size cap, parsed as YAML 1.2 and
 * checked against the schema, each problem reported with its line and column.
 */
import { readFile, stat } from 'node:fs/promises';
import { findProblems, formatPath } from './configProblems.js';
import type { Json, JsonObject } from './configValues.js';

// A configuration file is small; refusing huge files bounds parse time and memory.
const MAX_CONFIG_BYTES = 1024 * 1024;

/** The file's settings (snake_case, as written) and what is wrong with them. */
export interface FileLayer {
  data: JsonObject;
  problems: string[];
}

/** Reads `file`; an absent file is an empty layer unless `required` (`--config`). */
export async function readConfigFile(file: string, required: boolean): Promise<FileLayer> {
  const fail = (message: string): FileLayer => ({ data: {}, problems: [`${file}: ${message}`] });
  let text: string;
  try {
    const info = await stat(file);
    if (!info.isFile()) return fail('is not a regular file');
    if (info.size > MAX_CONFIG_BYTES) return fail(`is larger than ${MAX_CONFIG_BYTES} bytes`);
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // An absent optional file is normal; ENOTDIR (data dir is a file) is left for `amf doctor` to report.
    if ((code === 'ENOENT' || code === 'ENOTDIR') && !required) return { data: {}, problems: [] };
    return fail(`cannot read config file (${code === 'ENOENT' ? 'no such file' : (code ?? String(err))})`);
  }

  // Loaded only when there is a file: yaml is most of the modules a short command would load.
  const [{ LineCounter, parseDocument }, { locate }] = await Promise.all([
    import('yaml'),
    import('./configLocate.js'),
  ]);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, {
    version: '1.2',
    lineCounter,
    prettyErrors: false,
    uniqueKeys: true,
  });
  if (doc.errors.length > 0) {
    return {
      data: {},
      problems: doc.errors.map((e) => {
        const { line, col } = lineCounter.linePos(e.pos[0]);
        return `${file}: YAML syntax error at line ${line}, column ${col}: ${firstLine(e.message)}`;
      }),
    };
  }
  let data: unknown;
  try {
    // maxAliasCount bounds "billion laughs" expansion of anchors.
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return fail(`YAML error: ${firstLine((err as Error).message)}`);
  }
  data ??= {}; // an empty file, or one with only comments, changes nothing
  // Reported in file order, so the list reads top to bottom like the file.
  const located = findProblems(data as Json).map((p) => ({
    p,
    at: locate(doc, lineCounter, p.path, p.isKey),
  }));
  located.sort((a, b) => (a.at?.offset ?? -1) - (b.at?.offset ?? -1));
  const problems = located.map(({ p, at }) => {
    const key = p.path.length > 0 ? `${formatPath(p.path)}: ` : '';
    const where = at ? ` at line ${at.line}, column ${at.col}` : '';
    return `${file}: ${key}${p.message}${where}`;
  });
  return { data: data as JsonObject, problems };
}

function firstLine(text: string): string {
  return text.split('\n')[0] ?? text;
}
