/**
 * `amf run FILE.afm.md`: loads and resolves the AFM file, builds the agent runtime (model and MCP
 * tools), then serves its interfaces and, unless `--no-mesh`, joins the mesh as a worker (the
 * coordinator found like `amf worker` finds it). SIGINT/SIGTERM, or leaving the console chat, stops
 * it cleanly: WebSub unsubscription, worker drain, MCP servers closed.
 */
import type { Command } from 'commander';
import type { ConfigOverrides } from '../config/config.js';
import { AmfError } from '../errors.js';
import { parsePort, splitTags } from './cliArgs.js';
import { resolveModelSettings } from '../llm/modelSettings.js';
import type { runAgent, RunAgentMeshOptions } from '../apps/afmAgentApp.js';
import { startMemoryTrimmer } from '../util/memoryTrimmer.js';
import {
  DEFAULT_AGENT_PORT,
  chooseAgentPort,
  explainListenFailure,
  type AgentPortChoice,
} from './agentPort.js';

export interface RunFlags {
  config?: string;
  dataDir?: string;
  coordinator?: string;
  natsUrl?: string;
  tags?: string[];
  port?: number;
  host?: string;
  mdns?: boolean;
  mdnsInterface?: string;
  mesh?: boolean;
  console?: boolean;
  /** `--invite TOKEN`: join another machine's mesh (worker/inviteJoin.ts). */
  invite?: string;
}

function describeRunning(agent: Awaited<ReturnType<typeof runAgent>>): string {
  const lines = [`AFM agent "${agent.definition.name}" v${agent.definition.version}`];
  // Which model endpoint answers (never the key): a newcomer's first question when nothing replies.
  const model = resolveModelSettings(agent.definition.model);
  lines.push(`  model    ${model.provider} "${model.model}" at ${model.baseUrl}`);
  const { webchat, webhook } = agent.interfaces;
  if (agent.url) {
    if (webchat)
      lines.push(
        `  webchat  POST ${agent.url}${webchat.exposure.http.path}  (page ${agent.url}${webchat.exposure.http.path}/ui)`,
      );
    if (webhook) lines.push(`  webhook  POST ${agent.url}${webhook.exposure.http.path}`);
    lines.push(`  info     GET  ${agent.url}/`);
  }
  if (agent.worker)
    lines.push(
      `  mesh     worker ${agent.worker.worker.agentId} serving ${agent.tags.join(', ')} (model amf/${agent.tags[0]}; A2A and MCP at ${agent.worker.url})`,
    );
  return lines.join('\n') + '\n';
}

/** Runs `amf run`; resolves when the agent has stopped. */
export async function runAgentCommand(file: string, flags: RunFlags): Promise<void> {
  // Loaded here, not at the top: every other `amf` command would pay for the agent runtime at start-up.
  const [
    { loadConfig },
    { createLogger },
    { loadAfmFile },
    { createAgentRuntime, connectedHubs },
    { runtimeResponder },
  ] = await Promise.all([
    import('../config/config.js'),
    import('../log.js'),
    import('../afm/index.js'),
    import('../afm/runtime/index.js'),
    import('../afm/interfaces/runtimeResponder.js'),
  ]);
  const [
    { runAgent, workerNameFor, meshTagsFor },
    { locateCoordinator, natsUrlFromCoordinator, meshAccess, invitedAccess },
  ] = await Promise.all([import('../apps/afmAgentApp.js'), import('./workerCommand.js')]);
  const overrides: Record<string, unknown> = {};
  if (flags.dataDir) overrides.dataDir = flags.dataDir;
  if (flags.coordinator) overrides.coordinator = { url: flags.coordinator };
  if (flags.natsUrl) overrides.nats = { url: flags.natsUrl };
  const mdns: Record<string, unknown> = {};
  if (flags.mdns === false) mdns.enabled = false;
  if (flags.mdnsInterface !== undefined) mdns.interface = flags.mdnsInterface;
  if (Object.keys(mdns).length) overrides.mdns = mdns;
  const config = await loadConfig({
    ...(flags.config ? { configPath: flags.config } : {}),
    flags: overrides as ConfigOverrides,
  });
  const definition = await loadAfmFile(file, { dataDir: config.dataDir });
  const host = flags.host ?? config.worker.host;
  const listens =
    flags.mesh !== false || definition.interfaces.some((i) => i.type === 'webchat' || i.type === 'webhook');
  // Before anything starts: a port the user chose and another program holds fails at once.
  const listenOn: AgentPortChoice = listens
    ? await chooseAgentPort({
        host,
        port: flags.port ?? config.worker.port,
        chosen: flags.port !== undefined || config.worker.port !== DEFAULT_AGENT_PORT,
      })
    : { port: flags.port ?? config.worker.port };
  if (listenOn.note) process.stderr.write(`amf run: ${listenOn.note}\n`);
  const hasConsole = definition.interfaces.some((i) => i.type === 'consolechat');
  const useConsole = flags.console === true || (hasConsole && process.stdin.isTTY === true);
  // Info lines would interleave with a terminal chat: the console keeps warnings and errors only.
  const log = createLogger(useConsole && config.logLevel === 'info' ? 'warn' : config.logLevel, 'amf-run');
  const trimmer = startMemoryTrimmer();
  log.debug(trimmer.description);
  const runtime = await createAgentRuntime(definition, { logger: log, requireTls: config.mcp.requireTls });
  // A tool server that cannot start is not fatal (the agent runs without it), but the user must see it.
  for (const failure of runtime.toolFailures) {
    const index = definition.tools.mcp.findIndex((m) => m.name === failure.server);
    const at = definition.source.position(`/tools/mcp/${index}`);
    process.stderr.write(
      `${definition.source.path}${at ? `:${at.line}:${at.column}` : ''}: warning: MCP server "${failure.server}" is not available: ${failure.error}\n`,
    );
  }
  let mesh: RunAgentMeshOptions | undefined;
  try {
    if (flags.mesh !== false) {
      const explicit = flags.coordinator !== undefined || Boolean(process.env.AMF_COORDINATOR_URL);
      const name = workerNameFor(definition.name);
      const invited = await invitedAccess(config, name, meshTagsFor(definition, flags.tags), {
        invite: flags.invite ?? process.env.AMF_INVITE,
        bindHost: flags.host ?? config.worker.host,
        ...(explicit ? { coordinatorUrl: config.coordinator.url } : {}),
      });
      mesh = {
        natsUrl:
          config.nats.url ??
          invited?.natsUrl ??
          (await natsUrlFromCoordinator(await locateCoordinator(config, explicit))),
        ...(invited?.access ?? (await meshAccess(config, name))),
        heartbeatSeconds: config.heartbeat.intervalSeconds,
        concurrency: config.worker.concurrency,
        ...(config.mdns.enabled
          ? { mdns: config.mdns.interface ? { interfaceAddress: config.mdns.interface } : {} }
          : {}),
      };
    }
    // Signals are caught from here on: one that arrives while the agent is still starting (its banner
    // may already be out) stops it as soon as it is up, instead of killing it half-built.
    let stopNow: ((why: string) => void) | undefined;
    let earlyStop: string | undefined;
    const onSignal = (why: string) => (stopNow ? stopNow(why) : (earlyStop ??= why));
    process.once('SIGINT', () => onSignal('SIGINT'));
    process.once('SIGTERM', () => onSignal('SIGTERM'));
    const agent = await runAgent({
      definition,
      responder: runtimeResponder(runtime),
      mcpServers: connectedHubs(runtime.tools),
      host,
      port: listenOn.port,
      ...(flags.tags && flags.tags.length > 0 ? { tags: flags.tags } : {}),
      ...(mesh ? { mesh } : {}),
      console: useConsole,
      log,
      // With a console on stdout, the banner goes to stderr so piped answers stay clean.
      onReady: (ready) => {
        if (ready.url || ready.worker || useConsole)
          (useConsole ? process.stderr : process.stdout).write(describeRunning(ready));
      },
    }).catch(async (err: unknown) => {
      throw await explainListenFailure(err, host, listenOn.port);
    });
    if (!agent.url && !agent.worker && !agent.consoleDone) {
      await agent.close();
      throw new AmfError(
        'INVALID_REQUEST',
        `${file}: nothing to serve: its only interface is consolechat and stdin is not a terminal; ` +
          'pass --console to read lines from stdin, add a webchat or webhook interface, or drop --no-mesh',
      );
    }
    await new Promise<void>((resolve) => {
      let stopping = false;
      const stop = (why: string) => {
        if (stopping) return;
        stopping = true;
        log.info({ why }, 'stopping');
        void agent.close().then(resolve, resolve);
      };
      stopNow = stop;
      if (earlyStop) stop(earlyStop);
      void agent.consoleDone?.then(() => stop('console closed'));
    });
  } finally {
    await runtime.close();
    trimmer.stop();
    log.flush();
  }
}

/** Registers `amf run` on the program. */
export function registerRunCommand(program: Command): void {
  program
    .command('run')
    .description('run an AFM agent: its interfaces (console, webchat, webhook) and a mesh worker')
    .argument('<file>', 'the agent file (.afm.md or .afm)')
    .option(
      '--tags <tags>',
      'capability tags, comma-separated (default: x-amf.tags, else from the name)',
      splitTags,
    )
    .option(
      '--port <port>',
      'HTTP port of the interfaces and the worker (default 8766 when free, else any free port; 0 = any)',
      parsePort,
    )
    .option('--host <host>', 'HTTP bind address (default 127.0.0.1)')
    .option('--coordinator <url>', 'coordinator URL (default: found on mDNS, else http://127.0.0.1:8765)')
    .option('--nats-url <url>', 'NATS URL (default: from the coordinator agent card)')
    .option('--config <path>', 'configuration file (default <data-dir>/amf.yaml)')
    .option('--data-dir <dir>', 'data directory (default ~/.amf)')
    .option('--mdns-interface <ip>', 'interface address for mDNS')
    .option('--no-mdns', 'do not use mDNS (NATS heartbeats only)')
    .option('--no-mesh', 'serve the interfaces only; do not join the mesh')
    .option(
      '--invite <token>',
      'join the mesh of another machine with a token from `amf invite` (use with --host)',
    )
    .option('--console', 'run the console chat even when stdin is not a terminal (one line per turn)')
    .action(async (file: string, flags: RunFlags) => {
      await runAgentCommand(file, flags);
    });
}
