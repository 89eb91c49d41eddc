/**
 * Splits an AFM file into its YAML front matter and its markdown body, keeping line numbers so every
 * later problem can point at the right line of the original file. The front matter is optional (all
 * its fields are); when the first line is `---` it must be closed by another `---` line.
 */

/** The two parts of an AFM file; line numbers are 1-based lines of the original file. */
export interface AfmSourceParts {
  /** YAML text between the `---` lines (absent when the file has no front matter). */
  readonly frontMatter?: string;
  /** Line of the first YAML line (the line after the opening `---`). */
  readonly frontMatterLine: number;
  /** Markdown body. */
  readonly body: string;
  /** Line of the first body line. */
  readonly bodyLine: number;
  /** Set when the front matter is opened and never closed. */
  readonly unclosedFrontMatter?: boolean;
}

const DELIMITER = /^---[ \t]*$/;

/** Normalises line ends (CRLF, CR) and drops a byte-order mark; columns stay the same. */
export function normaliseText(text: string): string {
  return (text.startsWith('\uFEFF') ? text.slice(1) : text).replace(/\r\n?/g, '\n');
}

/** Splits normalised text into front matter and body. */
export function splitAfmSource(text: string): AfmSourceParts {
  const lines = text.split('\n');
  if (lines.length === 0 || !DELIMITER.test(lines[0] ?? '')) {
    return { frontMatterLine: 1, body: text, bodyLine: 1 };
  }
  const close = lines.findIndex((line, i) => i > 0 && DELIMITER.test(line));
  if (close < 0) {
    return { frontMatterLine: 2, body: '', bodyLine: lines.length + 1, unclosedFrontMatter: true };
  }
  return {
    frontMatter: lines.slice(1, close).join('\n'),
    frontMatterLine: 2,
    body: lines.slice(close + 1).join('\n'),
    bodyLine: close + 2,
  };
}
