/**
 * The `amf` command line. Each command is a thin layer: it loads the one configuration (file < env <
 * flags), then calls the runtime or talks to a running coordinator over its HTTP API.
 */
import { Command, Option } from 'commander';
import type { AmfConfig, ConfigOverrides } from '../config/config.js';
import { VERSION } from '../version.js';
import { registerA2aCommand } from './a2aCommand.js';
import { registerRunCommand } from './runCommand.js';
import { parsePort, splitTags } from './cliArgs.js';
import { API_KEY_FLAG_HELP, warnApiKeyFlag, withOperatorKey } from './operatorKeyLookup.js';

// Each command imports what it runs inside its action: `amf --version` or `amf agents` must not load
// the coordinator, NATS, OPA or the SDKs (start-up time, issue 14).
const loadConfig: (typeof import('../config/config.js'))['loadConfig'] = async (options) =>
  (await import('../config/config.js')).loadConfig(options);

interface CommonFlags {
  config?: string;
  dataDir?: string;
  natsUrl?: string;
  coordinator?: string;
  apiKey?: string;
}

/** Loads the configuration with the flags every command shares. */
async function configFrom(flags: CommonFlags, extra: ConfigOverrides = {}): Promise<AmfConfig> {
  const overrides: Record<string, unknown> = { ...extra };
  if (flags.dataDir) overrides.dataDir = flags.dataDir;
  const coordinator: Record<string, unknown> = { ...((extra as { coordinator?: object }).coordinator ?? {}) };
  if (flags.coordinator) coordinator.url = flags.coordinator;
  if (flags.apiKey) {
    warnApiKeyFlag();
    coordinator.apiKey = flags.apiKey;
  }
  if (Object.keys(coordinator).length > 0) overrides.coordinator = coordinator;
  if (flags.natsUrl) overrides.nats = { ...((extra as { nats?: object }).nats ?? {}), url: flags.natsUrl };
  return loadConfig({
    ...(flags.config ? { configPath: flags.config } : {}),
    flags: overrides as ConfigOverrides,
  });
}

/** The configuration of a command that calls the coordinator, with the operator key it sends. */
async function clientConfigFrom(flags: CommonFlags): Promise<AmfConfig> {
  return withOperatorKey(await configFrom(flags));
}

function common(cmd: Command): Command {
  return cmd
    .option('--config <path>', 'configuration file (default <data-dir>/amf.yaml)')
    .option('--data-dir <dir>', 'data directory (default ~/.amf)');
}

function client(cmd: Command): Command {
  return common(cmd)
    .option('--coordinator <url>', 'coordinator URL (default http://127.0.0.1:8765)')
    .option(
      '--api-key <key>',
      `operator key to send; default AMF_API_KEY, else <data-dir>/operator.key ${API_KEY_FLAG_HELP}`,
    );
}

interface ListingFlags {
  json?: boolean;
  output?: 'table' | 'json';
}

/** `-o json` / `--json` of a command that prints a table (kubectl's `-o`). */
function listing(cmd: Command): Command {
  return cmd
    .addOption(
      new Option('-o, --output <format>', 'table (with a header row) or json').choices(['table', 'json']),
    )
    .option('--json', 'print JSON (as -o json)');
}

function listingFormat(opts: ListingFlags): 'table' | 'json' {
  return opts.json === true || opts.output === 'json' ? 'json' : 'table';
}

/** Builds the program (exported for tests of the argument parsing). */
export function buildProgram(): Command {
  const program = new Command('amf')
    .description('AMF: a local-first multi-agent mesh')
    .version(VERSION)
    .showHelpAfterError()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });

  common(program.command('up'))
    .description('start the coordinator (spawns nats-server unless --nats-url)')
    .option('--port <port>', 'HTTP port (0 = any free port)', parsePort)
    .option('--host <host>', 'HTTP bind address (default 127.0.0.1)')
    .option('--nats-url <url>', 'use an existing NATS server or cluster')
    .option('--nats-port <port>', 'port of the spawned nats-server (0 = any)', parsePort)
    .option('--no-mdns', 'do not use mDNS (NATS heartbeats only)')
    .option('--mdns-interface <ip>', 'interface address for mDNS')
    .option('--opa-url <url>', 'external OPA server for policy decisions')
    .option('--policy <path>', 'policy directory or bundle')
    .option(
      '--api-key <key>',
      `operator key the API requires; default AMF_API_KEY, else one generated into <data-dir>/operator.key ${API_KEY_FLAG_HELP}`,
    )
    .option('--demo', 'also start the demo workers (echo, calc)')
    .action(async (opts: CommonFlags & Record<string, unknown>) => {
      const overrides: Record<string, unknown> = {};
      const coordinator: Record<string, unknown> = {};
      if (opts.port !== undefined) coordinator.port = opts.port;
      if (opts.host !== undefined) coordinator.host = opts.host;
      if (opts.apiKey !== undefined) {
        warnApiKeyFlag();
        coordinator.apiKey = opts.apiKey;
      }
      if (Object.keys(coordinator).length) overrides.coordinator = coordinator;
      const nats: Record<string, unknown> = {};
      if (opts.natsUrl !== undefined) nats.url = opts.natsUrl;
      if (opts.natsPort !== undefined) nats.port = opts.natsPort;
      if (Object.keys(nats).length) overrides.nats = nats;
      const mdns: Record<string, unknown> = {};
      if (opts.mdns === false) mdns.enabled = false;
      if (opts.mdnsInterface !== undefined) mdns.interface = opts.mdnsInterface;
      if (Object.keys(mdns).length) overrides.mdns = mdns;
      const policy: Record<string, unknown> = {};
      if (opts.opaUrl !== undefined) policy.opaUrl = opts.opaUrl;
      if (opts.policy !== undefined) policy.path = opts.policy;
      if (Object.keys(policy).length) overrides.policy = policy;
      if (opts.dataDir) overrides.dataDir = opts.dataDir;
      const config = await loadConfig({
        ...(opts.config ? { configPath: opts.config } : {}),
        flags: overrides as ConfigOverrides,
      });
      const { runUp } = await import('./upCommand.js');
      await runUp(config, { demo: opts.demo === true });
    });

  client(program.command('worker'))
    .description('run a specialist worker')
    .requiredOption('--name <name>', 'worker name (unique in the mesh)')
    .requiredOption('--tags <tags>', 'capability tags, comma-separated', splitTags)
    .option(
      '--port <port>',
      'HTTP port (default 8766 when free, else any free port; a port given here is used or fails; 0 = any free port)',
      parsePort,
    )
    .option('--host <host>', 'HTTP bind address (default 127.0.0.1)')
    .option('--trust <domain>', 'trust domain (default local)')
    .option('--handler <handler>', 'echo | calc | path to a handler module', 'echo')
    .option('--nats-url <url>', 'NATS URL (default: from the coordinator agent card)')
    .option('--no-mdns', 'do not use mDNS (NATS heartbeats only)')
    .option('--mdns-interface <ip>', 'interface address for mDNS')
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate (needs --tls-key)')
    .option('--tls-key <file>', 'PEM private key of --tls-cert')
    .option(
      '--invite <token>',
      'join the mesh of another machine with a token from `amf invite` (use with --host)',
    )
    .action(async (opts: CommonFlags & Record<string, unknown>) => {
      const worker: Record<string, unknown> = { name: opts.name, tags: opts.tags, handler: opts.handler };
      if (opts.port !== undefined) worker.port = opts.port;
      if (opts.host !== undefined) worker.host = opts.host;
      if (opts.trust !== undefined) worker.trust = opts.trust;
      const mdns: Record<string, unknown> = {};
      if (opts.mdns === false) mdns.enabled = false;
      if (opts.mdnsInterface !== undefined) mdns.interface = opts.mdnsInterface;
      const config = await configFrom(opts, {
        worker,
        ...(Object.keys(mdns).length ? { mdns } : {}),
      } as ConfigOverrides);
      const { runWorkerCommand } = await import('./workerCommand.js');
      await runWorkerCommand(config, {
        explicitCoordinator: opts.coordinator !== undefined || Boolean(process.env.AMF_COORDINATOR_URL),
        tlsCert: opts.tlsCert as string | undefined,
        tlsKey: opts.tlsKey as string | undefined,
        invite: (opts.invite as string | undefined) ?? process.env.AMF_INVITE,
        portChosen: opts.port !== undefined,
      });
    });

  client(program.command('invite'))
    .description(
      "print a one-time invite for another machine's agent (last line; run on the coordinator's machine)",
    )
    .option('--tags <tags>', 'capability tags the invited agent may serve (default: any)', splitTags)
    .option('--ttl <duration>', 'how long the invite is valid: 90s, 30m, 1h, 7d (default 1h)')
    .action(async (opts: CommonFlags & { tags?: string[]; ttl?: string }) => {
      const config = await clientConfigFrom(opts);
      const { inviteCommand } = await import('./inviteCommand.js');
      process.exitCode = await inviteCommand(config, opts.tags ?? [], opts.ttl);
    });

  client(program.command('send'))
    .description('send a task to the mesh through the OpenAI API and print the answer')
    .requiredOption('--tag <tag>', 'capability tag')
    .option('--no-stream', 'wait for the whole answer instead of streaming it')
    .argument('<text...>', 'task text')
    .action(async (text: string[], opts: CommonFlags & { tag: string; stream: boolean }) => {
      const config = await clientConfigFrom(opts);
      const { sendCommand } = await import('./clientCommands.js');
      process.exitCode = await sendCommand(config, opts.tag, text.join(' '), opts.stream);
    });

  client(program.command('events'))
    .description(
      'stream mesh events, one line each (time, type, task, agent, summary); exits 1 when the coordinator goes away',
    )
    .option('--subject <pattern>', 'NATS subject filter', 'amf.>')
    .option('--json', 'print each whole event as one JSON line (for scripts)')
    .addOption(new Option('-o, --output <format>', 'line, or json as --json').choices(['line', 'json']))
    .option('--heartbeats', 'include agent heartbeats (left out by default)')
    .action(
      async (
        opts: CommonFlags & { subject: string; json?: boolean; output?: string; heartbeats?: boolean },
      ) => {
        const config = await clientConfigFrom(opts);
        const { eventsCommand } = await import('./clientCommands.js');
        process.exitCode = await eventsCommand(config, {
          subject: opts.subject,
          json: opts.json === true || opts.output === 'json',
          heartbeats: opts.heartbeats === true,
        });
      },
    );

  const agents = listing(client(program.command('agents')))
    .description('list the agents the coordinator knows (a table with a header; -o json for scripts)')
    .action(async (opts: CommonFlags & ListingFlags) => {
      const config = await clientConfigFrom(opts);
      const { agentsCommand } = await import('./clientCommands.js');
      process.exitCode = await agentsCommand(config, listingFormat(opts));
    });
  client(agents.command('approve'))
    .description('approve a pending agent (heard on mDNS only): enroll its key so it can join')
    .argument('<agent-id>', 'the agent id, e.g. spiffe://local/worker/lab-echo, or its short name lab-echo')
    .option('--key <nkey>', 'the key you expect the agent to have (refused if it names another)')
    .action(async (agentId: string, _opts: CommonFlags & { key?: string }, cmd: Command) => {
      const opts = cmd.optsWithGlobals<CommonFlags & { key?: string }>();
      const config = await clientConfigFrom(opts);
      const { approveAgentCommand } = await import('./clientCommands.js');
      process.exitCode = await approveAgentCommand(config, agentId, opts.key);
    });
  client(agents.command('forget'))
    .description('forget an agent, live or not (remove it from the registry and unbind its key)')
    .argument('<agent-id>', 'the agent id, e.g. spiffe://local/worker/my-echo, or its short name my-echo')
    .action(async (agentId: string, _opts: CommonFlags, cmd: Command) => {
      // --coordinator and --api-key may be parsed by `agents` itself: read them from both.
      const config = await clientConfigFrom(cmd.optsWithGlobals<CommonFlags>());
      const { forgetAgentCommand } = await import('./clientCommands.js');
      process.exitCode = await forgetAgentCommand(config, agentId);
    });

  for (const action of ['disable', 'enable'] as const)
    client(agents.command(action))
      .description(
        action === 'disable'
          ? 'disable an agent: it stays connected and finishes what it holds, but gets no new work or routes'
          : 'enable a disabled agent: it is offered work and routes again',
      )
      .argument('<agent-id>', 'the agent id, e.g. spiffe://local/worker/my-echo, or its short name my-echo')
      .action(async (agentId: string, _opts: CommonFlags, cmd: Command) => {
        const config = await clientConfigFrom(cmd.optsWithGlobals<CommonFlags>());
        const { switchAgentCommand } = await import('./clientCommands.js');
        process.exitCode = await switchAgentCommand(config, agentId, action);
      });

  listing(client(program.command('audit')))
    .description('show the newest MCP call audit records (newest first)')
    .option('--limit <n>', 'how many records (1..500)', '20')
    .action(async (opts: CommonFlags & ListingFlags & { limit: string }) => {
      const config = await clientConfigFrom(opts);
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 500) {
        process.stderr.write('amf audit: --limit must be an integer from 1 to 500\n');
        process.exitCode = 2;
        return;
      }
      const { auditCommand } = await import('./clientCommands.js');
      process.exitCode = await auditCommand(config, limit, listingFormat(opts));
    });

  client(program.command('publish'))
    .description('publish a CloudEvent of TYPE through the coordinator')
    .argument('<type>', 'AMF event type, e.g. amf.task.announce')
    .requiredOption('--data <json>', 'event payload as JSON')
    .option('--task-id <id>', 'amftaskid of the event')
    .action(async (type: string, opts: CommonFlags & { data: string; taskId?: string }) => {
      const config = await clientConfigFrom(opts);
      const { publishCommand } = await import('./clientCommands.js');
      process.exitCode = await publishCommand(config, type, opts.data, opts.taskId);
    });

  client(program.command('doctor'))
    .description('check nats-server, opa, ports and the data directory')
    .action(async (opts: CommonFlags) => {
      const config = await configFrom(opts);
      const { formatDoctorReport, runDoctor } = await import('./doctor.js');
      const result = await runDoctor({ config });
      process.stdout.write(formatDoctorReport(result) + '\n');
      process.exitCode = result.ok ? 0 : 1;
    });

  client(program.command('mcp'))
    .description(
      "stdio MCP server proxying the coordinator's aggregate /mcp (for Claude Desktop, Cursor, VS Code)",
    )
    .action(async (opts: CommonFlags) => {
      const config = await clientConfigFrom(opts);
      // stdout is the MCP protocol: the logger writes to stderr only.
      const [{ mcpCommand }, { createLogger }] = await Promise.all([
        import('./mcpCommand.js'),
        import('../log.js'),
      ]);
      process.exitCode = await mcpCommand({
        coordinatorUrl: config.coordinator.url,
        apiKey: config.coordinator.apiKey,
        logger: createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, 'amf-mcp'),
      });
    });

  registerA2aCommand(program);

  program
    .command('validate')
    .description('check AFM files (.afm.md, .afm): every problem as file:line:col, exit 1 on any error')
    .argument('<files...>', 'AFM files to check')
    .action(async (files: string[]) => {
      const { validateCommand } = await import('./validateCommand.js');
      process.exitCode = await validateCommand(files);
    });

  registerRunCommand(program);
  return program;
}

/** Runs the CLI with `argv` (as process.argv). */
export async function main(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    const e = err as Error & { problems?: string[] };
    process.stderr.write(`amf: ${e.message}\n`);
    process.exitCode = 1;
  }
}
