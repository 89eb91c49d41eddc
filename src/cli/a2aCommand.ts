/**
 * `amf a2a send URL TEXT`: talks to any A2A agent (an AMF coordinator or worker, or an external
 * agent) with the same client the mesh uses for bridged agents. Prints the answer text, streams it
 * with `--stream`, or prints JSON with `--json`. Exit code 0 only for a completed task.
 */
import type { Command } from 'commander';
import { AmfError } from '../errors.js';
import type { RemoteA2aAgent, SendOptions } from '../a2aClient/remoteAgent.js';
import type { A2aReply } from '../a2aClient/replyMapping.js';
import { isCapabilityTag } from '../events/subjects.js';
import { API_KEY_FLAG_HELP, warnApiKeyFlag } from './operatorKeyLookup.js';

export interface A2aSendOptions {
  stream?: boolean;
  json?: boolean;
  /** Sent as `Authorization: Bearer KEY` (an AMF coordinator started with --api-key). */
  apiKey?: string;
  /** `message.metadata.tag`: the capability an AMF coordinator routes the message to. */
  tag?: string;
  timeoutSeconds?: number;
}

/** Where the command writes (tests pass their own). */
export interface CommandOutput {
  out(text: string): void;
  err(text: string): void;
}

const processOutput: CommandOutput = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
};

function replyJson(agent: RemoteA2aAgent, reply: A2aReply): Record<string, unknown> {
  return {
    agent: agent.card.name,
    protocol: { binding: agent.protocolBinding, version: agent.protocolVersion },
    kind: reply.kind,
    state: reply.state,
    text: reply.text,
    ...(reply.taskId ? { task_id: reply.taskId } : {}),
    ...(reply.contextId ? { context_id: reply.contextId } : {}),
    ...(reply.data.length ? { data: reply.data } : {}),
    ...(reply.files.length ? { files: reply.files } : {}),
  };
}

/** Runs `amf a2a send`; returns the exit code. */
export async function a2aSendCommand(
  url: string,
  text: string,
  options: A2aSendOptions = {},
  io: CommandOutput = processOutput,
): Promise<number> {
  try {
    if (options.tag !== undefined && !isCapabilityTag(options.tag))
      throw new AmfError(
        'INVALID_REQUEST',
        `--tag "${options.tag}" is not a capability tag ([a-z0-9-]{1,64})`,
      );
    const headers = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : undefined;
    // Loaded on use: the A2A SDK would otherwise slow the start-up of every `amf` command.
    const { RemoteA2aAgent } = await import('../a2aClient/remoteAgent.js');
    const agent = await RemoteA2aAgent.connect(url, headers ? { headers } : {});
    const send: SendOptions = {
      ...(options.tag ? { metadata: { tag: options.tag } } : {}),
      ...(options.timeoutSeconds !== undefined ? { timeoutMs: options.timeoutSeconds * 1000 } : {}),
    };
    let reply: A2aReply | undefined;
    if (options.stream) {
      let streamed = false;
      for await (const step of agent.stream(text, send)) {
        if (options.json) {
          const line = step.reply
            ? { final: true, ...replyJson(agent, step.reply) }
            : {
                state: step.state,
                ...(step.delta ? { delta: step.delta } : {}),
                ...(step.progress ? { progress: step.progress } : {}),
              };
          io.out(`${JSON.stringify(line)}\n`);
        } else if (step.delta) {
          streamed = true;
          io.out(step.delta);
        }
        if (step.reply) reply = step.reply;
      }
      if (!options.json && reply) {
        // A task that ended without artifacts carries its answer in its final status message.
        if (reply.text && !streamed) io.out(reply.text);
        io.out('\n');
      }
    } else {
      reply = await agent.send(text, send);
      io.out(options.json ? `${JSON.stringify(replyJson(agent, reply), null, 2)}\n` : `${reply.text}\n`);
    }
    if (!reply) throw new AmfError('UNAVAILABLE', 'the agent closed the stream without an answer');
    if (reply.state !== 'completed') {
      io.err(`amf a2a send: the task ended ${reply.state}${reply.taskId ? ` (task ${reply.taskId})` : ''}\n`);
      return 1;
    }
    return 0;
  } catch (err) {
    io.err(`amf a2a send: ${(err as Error).message}\n`);
    return 1;
  }
}

function parseTimeout(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > 3600)
    throw new AmfError('INVALID_REQUEST', `invalid --timeout "${value}": expected seconds, 1..3600`);
  return n;
}

/** Adds `amf a2a send` to the program. */
export function registerA2aCommand(program: Command): void {
  const a2a = program.command('a2a').description('talk to A2A agents');
  a2a
    .command('send')
    .description(
      'send TEXT to the A2A agent at URL (its base URL or its agent card URL) and print the answer',
    )
    .argument('<url>', 'agent base URL, e.g. http://127.0.0.1:8765, or the URL of its agent card')
    .argument('<text...>', 'message text')
    .option('--stream', 'stream the answer (SendStreamingMessage)')
    .option('--json', 'print the reply as JSON (one JSON line per event with --stream)')
    .option('--tag <tag>', 'capability tag for an AMF coordinator (message.metadata.tag)')
    .option('--api-key <key>', `send Authorization: Bearer KEY; default AMF_API_KEY ${API_KEY_FLAG_HELP}`)
    .option('--timeout <seconds>', 'give up after this many seconds (default 120)', parseTimeout)
    .action(
      async (
        url: string,
        text: string[],
        opts: { stream?: boolean; json?: boolean; tag?: string; apiKey?: string; timeout?: number },
      ) => {
        if (opts.apiKey !== undefined) warnApiKeyFlag();
        // Never the data dir's key: URL may be any agent, and the key is this mesh's operator's.
        const apiKey = opts.apiKey ?? process.env.AMF_API_KEY;
        process.exitCode = await a2aSendCommand(url, text.join(' '), {
          stream: opts.stream === true,
          json: opts.json === true,
          ...(opts.tag !== undefined ? { tag: opts.tag } : {}),
          ...(apiKey ? { apiKey } : {}),
          ...(opts.timeout !== undefined ? { timeoutSeconds: opts.timeout } : {}),
        });
      },
    );
}
