/**
 * The `calc` demo handler: evaluates an arithmetic expression ("what is 2 * (3 + 4)?") with a small
 * recursive-descent parser. No `eval`: the grammar admits numbers, + - * / % ^, parentheses, a few
 * functions and constants, so untrusted task text cannot run code.
 */
import { HandlerError, type TaskContext, type WorkerHandler } from '../handlerApi.js';

const FUNCTIONS: Record<string, (...args: number[]) => number> = {
  sqrt: Math.sqrt,
  abs: Math.abs,
  round: Math.round,
  floor: Math.floor,
  ceil: Math.ceil,
  ln: Math.log,
  log10: Math.log10,
  sin: Math.sin,
  cos: Math.cos,
  tan: Math.tan,
  min: Math.min,
  max: Math.max,
};
const CONSTANTS: Record<string, number> = { pi: Math.PI, e: Math.E };
const MAX_EXPRESSION = 512;

type Token = { kind: 'num'; value: number } | { kind: 'id'; value: string } | { kind: 'op'; value: string };

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  const re = /\s*(?:(\d+(?:\.\d+)?(?:e[+-]?\d+)?|\.\d+)|([a-z][a-z0-9]*)|(\*\*|[-+*/%^(),]))/giy;
  let pos = 0;
  while (pos < src.length) {
    re.lastIndex = pos;
    const m = re.exec(src);
    if (!m) {
      if (/^\s*$/.test(src.slice(pos))) break;
      throw new HandlerError(
        'invalid_expression',
        `unexpected character "${src[pos] ?? ''}" at position ${pos}`,
      );
    }
    pos = re.lastIndex;
    if (m[1] !== undefined) tokens.push({ kind: 'num', value: Number(m[1]) });
    else if (m[2] !== undefined) tokens.push({ kind: 'id', value: m[2].toLowerCase() });
    else if (m[3] !== undefined) tokens.push({ kind: 'op', value: m[3] === '**' ? '^' : m[3] });
  }
  return tokens;
}

class Parser {
  private i = 0;
  constructor(private readonly tokens: Token[]) {}

  parse(): number {
    const value = this.expr();
    if (this.i < this.tokens.length)
      throw new HandlerError('invalid_expression', 'unexpected input after the expression');
    return value;
  }

  private peekOp(): string | undefined {
    const t = this.tokens[this.i];
    return t?.kind === 'op' ? t.value : undefined;
  }

  private expr(): number {
    let value = this.term();
    for (let op = this.peekOp(); op === '+' || op === '-'; op = this.peekOp()) {
      this.i++;
      const rhs = this.term();
      value = op === '+' ? value + rhs : value - rhs;
    }
    return value;
  }

  private term(): number {
    let value = this.unary();
    for (let op = this.peekOp(); op === '*' || op === '/' || op === '%'; op = this.peekOp()) {
      this.i++;
      const rhs = this.unary();
      if ((op === '/' || op === '%') && rhs === 0)
        throw new HandlerError('division_by_zero', 'division by zero');
      value = op === '*' ? value * rhs : op === '/' ? value / rhs : value % rhs;
    }
    return value;
  }

  private unary(): number {
    const op = this.peekOp();
    if (op === '-' || op === '+') {
      this.i++;
      const v = this.unary();
      return op === '-' ? -v : v;
    }
    return this.power();
  }

  private power(): number {
    const base = this.primary();
    if (this.peekOp() === '^') {
      this.i++;
      return base ** this.unary(); // right-associative
    }
    return base;
  }

  private primary(): number {
    const t = this.tokens[this.i++];
    if (!t) throw new HandlerError('invalid_expression', 'the expression ends too early');
    if (t.kind === 'num') return t.value;
    if (t.kind === 'op' && t.value === '(') {
      const v = this.expr();
      this.expect(')');
      return v;
    }
    if (t.kind === 'id') {
      const constant = CONSTANTS[t.value];
      if (constant !== undefined) return constant;
      const fn = FUNCTIONS[t.value];
      if (!fn) throw new HandlerError('invalid_expression', `unknown name "${t.value}"`);
      this.expect('(');
      const args = [this.expr()];
      while (this.peekOp() === ',') {
        this.i++;
        args.push(this.expr());
      }
      this.expect(')');
      return fn(...args);
    }
    throw new HandlerError('invalid_expression', `unexpected "${t.value}"`);
  }

  private expect(op: string): void {
    const t = this.tokens[this.i++];
    if (t?.kind !== 'op' || t.value !== op) throw new HandlerError('invalid_expression', `expected "${op}"`);
  }
}

/** Evaluates an arithmetic expression; throws HandlerError with a clear message when it is not one. */
export function evaluateExpression(text: string): number {
  const expression = text
    .trim()
    .replace(/^(what\s+is|what's|calculate|compute|evaluate)\s+/i, '')
    .replace(/[?=\s]+$/, '');
  if (expression.length === 0) throw new HandlerError('invalid_expression', 'no expression given');
  if (expression.length > MAX_EXPRESSION)
    throw new HandlerError('invalid_expression', `expression longer than ${MAX_EXPRESSION} characters`);
  const value = new Parser(tokenize(expression)).parse();
  if (!Number.isFinite(value))
    throw new HandlerError('invalid_expression', 'the result is not a finite number');
  return value;
}

export const calcHandler: WorkerHandler = {
  name: 'calc',
  description: 'Evaluates an arithmetic expression such as "2 * (3 + 4) ^ 2" or "sqrt(2)" (argument `text`).',
  readOnly: true,
  handle: (ctx: TaskContext) => {
    const value = evaluateExpression(ctx.text);
    return Promise.resolve({ text: String(Number(value.toPrecision(15))), data: { value } });
  },
};
