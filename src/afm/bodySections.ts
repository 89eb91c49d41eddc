/**
 * The markdown body's two required sections, `# Role` and `# Instructions` (AFM 4.3). A section is a
 * level-1 ATX heading whose text is exactly `Role` / `Instructions` (any case, trailing `#`s allowed)
 * and runs until the next `# Role` / `# Instructions` heading; other level-1 headings stay inside the
 * section they appear in, so no text is silently dropped. Headings inside fenced code blocks are text.
 */

/** A problem in the body, on a 1-based line of the original file. */
export interface BodyProblem {
  readonly severity: 'error' | 'note';
  readonly line: number;
  readonly column: number;
  readonly message: string;
}

/** One section found in the body. */
export interface BodySection {
  readonly text: string;
  /** Line of the heading. */
  readonly line: number;
}

export interface BodySections {
  readonly role?: BodySection;
  readonly instructions?: BodySection;
  readonly problems: readonly BodyProblem[];
}

const H1 = /^ {0,3}#(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

type SectionName = 'role' | 'instructions';

function sectionOf(line: string): SectionName | undefined {
  const m = H1.exec(line);
  if (!m) return undefined;
  const title = (m[1] ?? '').trim().toLowerCase();
  return title === 'role' || title === 'instructions' ? title : undefined;
}

/** Finds the Role and Instructions sections; `firstLine` is the body's line in the file. */
export function readBodySections(body: string, firstLine: number): BodySections {
  const lines = body.split('\n');
  const problems: BodyProblem[] = [];
  const found: Partial<Record<SectionName, { line: number; lines: string[] }>> = {};
  let current: SectionName | undefined;
  let fence: string | undefined;
  let strayLine: number | undefined;

  lines.forEach((line, i) => {
    const lineNo = firstLine + i;
    const fenceMatch = FENCE.exec(line);
    if (fence) {
      if (fenceMatch?.[1] && fenceMatch[1][0] === fence[0] && fenceMatch[1].length >= fence.length)
        fence = undefined;
    } else if (fenceMatch?.[1]) {
      fence = fenceMatch[1];
    } else {
      const name = sectionOf(line);
      if (name) {
        if (found[name]) {
          problems.push({
            severity: 'error',
            line: lineNo,
            column: 1,
            message: `duplicate '# ${name === 'role' ? 'Role' : 'Instructions'}' section (first at line ${found[name].line})`,
          });
          current = undefined;
          return;
        }
        found[name] = { line: lineNo, lines: [] };
        current = name;
        return;
      }
    }
    if (current) found[current]?.lines.push(line);
    else if (line.trim() !== '' && strayLine === undefined && !found.role && !found.instructions)
      strayLine = lineNo;
  });

  if (strayLine !== undefined) {
    problems.push({
      severity: 'note',
      line: strayLine,
      column: 1,
      message:
        "text before the first '# Role' or '# Instructions' section is not part of the agent and is ignored",
    });
  }
  const result: { role?: BodySection; instructions?: BodySection } = {};
  for (const name of ['role', 'instructions'] as const) {
    const heading = name === 'role' ? 'Role' : 'Instructions';
    const section = found[name];
    if (!section) {
      problems.push({
        severity: 'error',
        line: firstLine,
        column: 1,
        message: `missing required '# ${heading}' section in the markdown body (AFM 4.3)`,
      });
      continue;
    }
    const text = section.lines.join('\n').trim();
    if (!text) {
      problems.push({
        severity: 'error',
        line: section.line,
        column: 1,
        message: `'# ${heading}' section is empty: it must say ${name === 'role' ? 'what the agent is for' : 'how the agent behaves'}`,
      });
    }
    result[name] = { text, line: section.line };
  }
  return { ...result, problems };
}

/**
 * The default description: the first paragraph of the role, whitespace collapsed, at most 300
 * characters (cut at a word with an ellipsis).
 */
export function descriptionFromRole(role: string): string {
  const paragraph = (role.split(/\n[ \t]*\n/)[0] ?? '').replace(/\s+/g, ' ').trim();
  if (paragraph.length <= 300) return paragraph;
  const cut = paragraph.slice(0, 299);
  const space = cut.lastIndexOf(' ');
  return `${(space > 200 ? cut.slice(0, space) : cut).trimEnd()}…`;
}
