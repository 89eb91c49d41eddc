/**
 * `amf validate FILE...`: checks AFM files without running them and without resolving variables
 * (no environment variable, file or secret is needed; unset environment variables are notes). Prints
 * every problem as `file:line:col: message` (notes as `file:line:col: note: message`) and `FILE: ok`
 * for a valid file. Exit code 0 when every file is valid, 1 when any has an error.
 */
import { validateAfmFile } from '../afm/index.js';

/** Where the command writes (process streams by default; tests pass their own). */
export interface ValidateOutput {
  write(text: string): void;
}

/** Validates each file in turn; returns the exit code. */
export async function validateCommand(
  files: readonly string[],
  out: ValidateOutput = process.stdout,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<number> {
  let failed = 0;
  for (const file of files) {
    const { problems } = await validateAfmFile(file, { env });
    let errors = 0;
    for (const p of problems) {
      if (p.severity === 'error') errors += 1;
      const label = p.severity === 'note' ? 'note: ' : '';
      out.write(`${p.file}:${p.line}:${p.column}: ${label}${p.message}\n`);
    }
    if (errors === 0) out.write(`${file}: ok\n`);
    else failed += 1;
  }
  if (files.length > 1 && failed > 0) out.write(`${failed} of ${files.length} files are invalid\n`);
  return failed > 0 ? 1 : 0;
}
