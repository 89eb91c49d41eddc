/**
 * A coordinator stopped by SIGTERM while A2A and MCP answers are under way ends them with an answer
 * instead of a cut (issue 33, part 6; the OpenAI equivalent is streamStop.test.ts): real processes
 * (`amf up` with its spawned nats-server, `amf worker` whose handler waits), the official clients.
 * - A2A `message/stream` (@a2a-js/sdk): the stream's last event is a status update, state failed,
 *   whose message says the coordinator is stopping, and the stream then ends without an error.
 * - MCP `tools/call` (MCP SDK, StreamableHTTPClientTransport): a call answered on an SSE response
 *   (it asked for progress) and a plain one each get a JSON-RPC error saying the server is stopping.
 * dist/ must be current: scripts/test.sh builds first; by hand, run `npm run build`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, TaskState, type StreamResponse } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { freePort } from '../../scripts/lib/freePort.mjs';
import { AMF_BIN, cleanCliEnv, killSpawnedNats } from '../helpers/amfCli.js';

const HANDLER = fileURLToPath(new URL('../fixtures/slowHandler.mjs', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Proc {
  child: ChildProcess;
  output: string;
  exited: Promise<number | null>;
}

const started: Proc[] = [];
let dataDir = '';

/** `amf ...args` in a process group of its own (its nats-server joins it), output kept. */
function amf(args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, [AMF_BIN, ...args], {
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc: Proc = {
    child,
    output: '',
    exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
  };
  for (const stream of [child.stdout!, child.stderr!])
    stream.on('data', (chunk: Buffer) => (proc.output += chunk.toString('utf8')));
  started.push(proc);
  return proc;
}

/** Polls `check` (every 100 ms) until it gives a value, or throws with `what` after `ms`. */
async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  ms: number,
  what: () => string,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

afterAll(async () => {
  for (const p of started.splice(0)) {
    try {
      process.kill(-p.child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    await p.exited;
  }
  if (dataDir) {
    await killSpawnedNats(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  }
});

/** Everything an A2A stream gave, and how it ended. */
interface A2aStreamEnd {
  events: StreamResponse[];
  /** The error the iteration threw (a cut stream), or undefined when it ended cleanly. */
  error: unknown;
}

async function follow(stream: AsyncGenerator<StreamResponse>, seen: StreamResponse[]): Promise<A2aStreamEnd> {
  try {
    for await (const event of stream) seen.push(event);
    return { events: seen, error: undefined };
  } catch (error) {
    return { events: seen, error };
  }
}

describe('a coordinator stopped (SIGTERM) while A2A and MCP answers are under way', () => {
  it(
    'ends the A2A stream with a failed status and answers the MCP calls with an error',
    { timeout: 180_000 },
    async () => {
      if (!existsSync(join(ROOT, 'dist/cli/main.js')))
        throw new Error('dist/ is missing: run `npm run build` (scripts/test.sh builds first)');
      dataDir = await mkdtemp(join(tmpdir(), 'amf-stream-stop-'));
      const env = cleanCliEnv(dataDir);
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const coordinator = amf(
        ['up', '--no-mdns', '--data-dir', dataDir, '--port', String(port), '--nats-port', '0'],
        env,
      );
      await waitFor(
        () => coordinator.output.includes('AMF coordinator http://'),
        60_000,
        () => `amf up to serve:\n${coordinator.output}`,
      );
      // The handler waits ten minutes (or until its task is cancelled): every answer is under way
      // when the coordinator stops.
      const worker = amf(
        [
          'worker',
          ...['--name', 'sloth', '--tags', 'slow', '--port', '0', '--no-mdns'],
          ...['--coordinator', url, '--data-dir', dataDir, '--handler', HANDLER],
        ],
        { ...env, SLOW_HANDLER_MS: '600000' },
      );

      const mcp = new McpClient({ name: 'stream-stop-test', version: '1.0.0' });
      await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
      const tool = await waitFor(
        async () => (await mcp.listTools()).tools.find((t) => t.name.endsWith('__slow'))?.name,
        60_000,
        () => `the worker's tool in /mcp:\n${worker.output}`,
      );

      // A2A message/stream: its first events (the task, working) come before the stop.
      const a2a = await new ClientFactory().createFromUrl(url);
      const seen: StreamResponse[] = [];
      const streamed = follow(
        a2a.sendMessageStream(
          SendMessageRequest.fromJSON({
            message: {
              messageId: crypto.randomUUID(),
              role: 'ROLE_USER',
              parts: [{ text: 'wait for me' }],
              metadata: { tag: 'slow' },
            },
          }),
        ),
        seen,
      );
      // MCP: one call that asked for progress (answered on an SSE response), one plain.
      const progressed: unknown[] = [];
      const onSse = mcp
        .callTool({ name: tool, arguments: { text: 'sse' } }, undefined, {
          onprogress: (p) => progressed.push(p),
          timeout: 120_000,
        })
        .then(
          (result) => ({ result }),
          (error: unknown) => ({ error }),
        );
      const plain = mcp
        .callTool({ name: tool, arguments: { text: 'plain' } }, undefined, { timeout: 120_000 })
        .then(
          (result) => ({ result }),
          (error: unknown) => ({ error }),
        );
      // All three running on the worker: the A2A task working, both tool calls in the handler.
      await waitFor(
        () =>
          seen.some(
            (e) =>
              e.payload?.$case === 'statusUpdate' &&
              e.payload.value.status?.state === TaskState.TASK_STATE_WORKING,
          ),
        30_000,
        () => `the A2A task working: ${JSON.stringify(seen)}`,
      );
      // The tool calls go to the worker's own MCP endpoint (no mesh task): its in-flight count shows them.
      const key = (await readFile(join(dataDir, 'operator.key'), 'utf8')).trim();
      const listed = await fetch(`${url}/agents`, { headers: { authorization: `Bearer ${key}` } });
      const agents = (await listed.json()) as { agents: Array<{ agent_id: string; endpoint: string }> };
      const endpoint = agents.agents.find((a) => a.agent_id.endsWith('/sloth'))?.endpoint;
      expect(endpoint).toBeTruthy();
      await waitFor(
        async () => {
          const res = await fetch(`${endpoint}/health`);
          return ((await res.json()) as { in_flight: number }).in_flight >= 3;
        },
        30_000,
        () => 'three calls in the handler',
      );

      coordinator.child.kill('SIGTERM');

      const end = await streamed;
      expect(end.error, `the A2A stream was cut: ${String(end.error)}`).toBeUndefined();
      const last = end.events.at(-1)?.payload;
      expect(last?.$case).toBe('statusUpdate');
      const status = last?.$case === 'statusUpdate' ? last.value.status : undefined;
      expect(status?.state).toBe(TaskState.TASK_STATE_FAILED);
      const text = status?.message?.parts[0]?.content;
      expect(text?.$case === 'text' ? text.value : '').toMatch(/coordinator is stopping/);

      for (const call of [await onSse, await plain]) {
        expect('error' in call, `the call ended with an error: ${JSON.stringify(call)}`).toBe(true);
        const error = 'error' in call ? call.error : undefined;
        expect(error, String(error)).toBeInstanceOf(McpError);
        expect((error as McpError).code).toBe(-32000);
        expect((error as McpError).message).toMatch(/server is stopping/);
      }
      expect(await coordinator.exited).toBe(0);
      await mcp.close().catch(() => undefined);
    },
  );
});
