/**
 * Helpers of the AFM interface tests: definitions parsed from AFM text by the real parser, a tiny
 * in-process responder (the interfaces' contract, no model), and an agent served on a random port.
 */
import { parseAfm } from '../../src/afm/index.js';
import type { AfmDefinition } from '../../src/afm/types.js';
import type { AgentResponder, RespondRequest, RespondResult } from '../../src/afm/interfaces/responder.js';
import { runAgent, type RunAgentOptions, type RunningAgent } from '../../src/apps/afmAgentApp.js';

/** Parses AFM text (front matter YAML without the `---` lines, then the body) into a definition. */
export function afm(
  frontMatter: string,
  env: Record<string, string | undefined> = {},
  name = 'test-agent',
): AfmDefinition {
  const text = `---\n${frontMatter}\n---\n# Role\nA test agent.\n\n# Instructions\nAnswer briefly.\n`;
  const result = parseAfm(text, `/tmp/${name}.afm.md`, { resolve: true, env });
  if (!result.definition)
    throw new Error(result.problems.map((p) => `${p.line}:${p.column} ${p.message}`).join('\n'));
  return result.definition;
}

/**
 * A responder that answers `turn N of SESSION: INPUT` (N counts the session's turns), streams that
 * answer in 3 deltas, and records every request. `answer` overrides what it says.
 */
export function recordingResponder(
  answer?: (req: RespondRequest, turn: number) => Partial<RespondResult>,
): AgentResponder & {
  requests: RespondRequest[];
  ended: string[];
} {
  const turns = new Map<string, number>();
  const requests: RespondRequest[] = [];
  const ended: string[] = [];
  return {
    requests,
    ended,
    respond(req) {
      requests.push(req);
      const n = (turns.get(req.sessionId) ?? 0) + 1;
      turns.set(req.sessionId, n);
      const custom = answer?.(req, n);
      const text =
        custom?.text ??
        `turn ${n} of ${req.sessionId}: ${typeof req.input === 'string' ? req.input : JSON.stringify(req.input)}`;
      const third = Math.ceil(text.length / 3);
      for (let i = 0; i < text.length; i += third) req.onDelta?.(text.slice(i, i + third));
      return Promise.resolve({
        output: custom?.output ?? text,
        text,
        ...(custom?.stopReason ? { stopReason: custom.stopReason } : {}),
      });
    },
    endSession(id) {
      turns.delete(id);
      ended.push(id);
    },
  };
}

/** Runs an agent without the mesh on a random port. */
export async function serveAgent(
  definition: AfmDefinition,
  responder: AgentResponder,
  extra: Partial<RunAgentOptions> = {},
): Promise<RunningAgent & { url: string }> {
  const agent = await runAgent({ definition, responder, port: 0, console: false, ...extra });
  if (!agent.url) throw new Error('agent serves no HTTP');
  return agent as RunningAgent & { url: string };
}

/** Parses an SSE body into its events. */
export function parseSse(body: string): { event: string; data: unknown }[] {
  return body
    .split('\n\n')
    .filter((frame) => frame.trim() !== '')
    .map((frame) => ({
      event: /^event: (.*)$/m.exec(frame)?.[1] ?? 'message',
      data: JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? 'null') as unknown,
    }));
}
