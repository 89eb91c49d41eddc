/**
 * The `consolechat` interface: a terminal chat on stdin/stdout with line history (node:readline),
 * answers streamed as the model produces them, `/exit` or Ctrl-D to leave, Ctrl-C to cancel the
 * running answer (a second Ctrl-C, or one at the prompt, leaves).
 */
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import type { AgentResponder } from './responder.js';
import type { CompiledSignature } from './signature.js';
import { toAmfError } from '../../errors.js';

export interface ConsoleChatOptions {
  responder: AgentResponder;
  signature: CompiledSignature;
  agentName: string;
  input?: Readable;
  output?: Writable;
  /** Show prompts and the banner (a terminal); piped input gets answers only. */
  interactive?: boolean;
  historySize?: number;
  /** Ends the chat (the agent is shutting down). */
  signal?: AbortSignal;
}

/** Runs the chat until /exit or end of input; resolves when it has ended. */
export async function runConsoleChat(opts: ConsoleChatOptions): Promise<void> {
  const input = opts.input ?? process.stdin;
  const out = opts.output ?? process.stdout;
  const interactive = opts.interactive ?? (process.stdin.isTTY === true && input === process.stdin);
  const rl = createInterface({
    input,
    output: interactive ? out : undefined,
    terminal: interactive,
    historySize: opts.historySize ?? 200,
    prompt: 'you> ',
  });
  let running: AbortController | undefined;
  opts.signal?.addEventListener('abort', () => {
    running?.abort();
    rl.close();
  });
  rl.on('SIGINT', () => {
    if (running) {
      running.abort();
      out.write('\n(cancelled)\n');
    } else rl.close();
  });
  if (interactive) out.write(`${opts.agentName} — type a message, /exit or Ctrl-D to leave.\n`);
  if (interactive) rl.prompt();
  for await (const line of rl) {
    const text = line.trim();
    if (text === '/exit' || text === '/quit') break;
    if (text === '') {
      if (interactive) rl.prompt();
      continue;
    }
    let value: unknown = text;
    if (!opts.signature.stringInput) {
      try {
        value = JSON.parse(text);
      } catch {
        out.write('error: this agent takes JSON input; type a JSON value on one line\n');
        if (interactive) rl.prompt();
        continue;
      }
    }
    running = new AbortController();
    let streamed = false;
    try {
      opts.signature.checkInput(value);
      if (interactive) out.write('agent> ');
      const result = await opts.responder.respond({
        sessionId: 'console',
        input: value,
        signature: { input: opts.signature.input, output: opts.signature.output },
        signal: running.signal,
        onDelta: (delta) => {
          streamed = true;
          out.write(delta);
        },
      });
      if (!streamed || typeof result.output !== 'string')
        out.write(typeof result.output === 'string' ? result.output : JSON.stringify(result.output, null, 2));
      out.write('\n');
      if (result.stopReason) out.write(`(stopped: ${result.stopReason})\n`);
    } catch (err) {
      if (!running.signal.aborted) out.write(`${streamed ? '\n' : ''}error: ${toAmfError(err).message}\n`);
    } finally {
      running = undefined;
    }
    if (interactive) rl.prompt();
  }
  rl.close();
}
