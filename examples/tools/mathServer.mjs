#!/usr/bin/env node
// A small math tools MCP server (stdio) for tutoring agents: evaluate (arithmetic with + - * / ^ %,
// parentheses, sqrt/abs/round/floor/ceil, pi and e — its own parser, no eval), prime_factors and
// gcd_lcm. Exact answers let the model explain steps instead of guessing at arithmetic.
//
//   node examples/tools/mathServer.mjs
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const FUNCTIONS = { sqrt: Math.sqrt, abs: Math.abs, round: Math.round, floor: Math.floor, ceil: Math.ceil };
const CONSTANTS = { pi: Math.PI, e: Math.E };

/** Recursive-descent evaluation: expr = term (+|- term)*, term = power (*|/|% power)*, power = unary (^ power)?. */
function evaluate(source) {
  const tokens = source.match(/\d+(?:\.\d+)?|[a-z]+|[-+*/%^()]|\S/gi) ?? [];
  let i = 0;
  const peek = () => tokens[i];
  const take = (expected) => {
    const t = tokens[i++];
    if (expected !== undefined && t !== expected)
      throw new Error(`expected "${expected}" but found "${t ?? 'end'}"`);
    return t;
  };
  const primary = () => {
    const t = take();
    if (t === undefined) throw new Error('unexpected end of expression');
    if (/^\d/.test(t)) return Number(t);
    if (t === '(') {
      const v = expr();
      take(')');
      return v;
    }
    const name = t.toLowerCase();
    if (name in CONSTANTS) return CONSTANTS[name];
    if (name in FUNCTIONS) {
      take('(');
      const v = expr();
      take(')');
      return FUNCTIONS[name](v);
    }
    throw new Error(`unknown symbol "${t}"`);
  };
  const unary = () => (peek() === '-' ? (take(), -unary()) : peek() === '+' ? (take(), unary()) : primary());
  const power = () => {
    const base = unary();
    return peek() === '^' ? (take(), base ** power()) : base;
  };
  const term = () => {
    let v = power();
    while (['*', '/', '%'].includes(peek())) {
      const op = take();
      const r = power();
      if ((op === '/' || op === '%') && r === 0) throw new Error('division by zero');
      v = op === '*' ? v * r : op === '/' ? v / r : v % r;
    }
    return v;
  };
  const expr = () => {
    let v = term();
    while (peek() === '+' || peek() === '-') v = take() === '+' ? v + term() : v - term();
    return v;
  };
  const value = expr();
  if (i < tokens.length) throw new Error(`unexpected "${tokens[i]}"`);
  return value;
}

const text = (value) => ({ content: [{ type: 'text', text: String(value) }] });
const failure = (err) => ({ content: [{ type: 'text', text: err.message }], isError: true });
const server = new McpServer({ name: 'amf-example-math', version: '1.0.0' });

server.registerTool(
  'evaluate',
  {
    description: 'Evaluates an arithmetic expression, e.g. "12 * (3 + 4)" or "sqrt(2) ^ 2"',
    inputSchema: { expression: z.string().min(1).max(500) },
  },
  async ({ expression }) => {
    try {
      return text(evaluate(expression));
    } catch (err) {
      return failure(err);
    }
  },
);

server.registerTool(
  'prime_factors',
  {
    description: 'Prime factorisation of a whole number from 2 to 10^12',
    inputSchema: { n: z.number().int().min(2).max(1e12) },
  },
  async ({ n }) => {
    const factors = [];
    let rest = n;
    for (let p = 2; p * p <= rest; p++)
      while (rest % p === 0) {
        factors.push(p);
        rest /= p;
      }
    if (rest > 1) factors.push(rest);
    return text(factors.join(' × '));
  },
);

server.registerTool(
  'gcd_lcm',
  {
    description: 'Greatest common divisor and least common multiple of two whole numbers',
    inputSchema: { a: z.number().int().min(1).max(1e12), b: z.number().int().min(1).max(1e12) },
  },
  async ({ a, b }) => {
    const gcd = (x, y) => (y === 0 ? x : gcd(y, x % y));
    const g = gcd(a, b);
    return text(JSON.stringify({ gcd: g, lcm: (a / g) * b }));
  },
);

await server.connect(new StdioServerTransport());
