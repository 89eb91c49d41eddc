/**
 * A real SPIRE deployment for tests: spire-server (SQLite datastore, in-memory keys, join-token node
 * attestation) on a loopback port, and a spire-agent attested by a join token, with the unix
 * workload attestor serving the Workload API on a socket in a temp dir. Binaries come from
 * scripts/install-spire.sh (cached by version; `AMF_SPIRE_DIR` points elsewhere). Everything is
 * stopped and removed by close().
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../scripts/lib/freePort.mjs';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
export const TRUST_DOMAIN = 'amf.test';

/** One registration entry. */
export interface SpireEntry {
  spiffeId: string;
  selectors: string[];
  jwtSvidTtlSeconds?: number;
}

export interface TestSpire {
  /** `unix://` address of the agent's Workload API (for SPIFFE_ENDPOINT_SOCKET). */
  socket: string;
  register(entry: SpireEntry): Promise<void>;
  /** Runs a spire-server CLI command against this server (its socket added); resolves with stdout. */
  serverCommand(args: string[]): Promise<string>;
  close(): Promise<void>;
}

/** Where the SPIRE binaries are (builds them once through scripts/install-spire.sh if missing). */
export async function spireDir(): Promise<string> {
  if (process.env.AMF_SPIRE_DIR) return process.env.AMF_SPIRE_DIR;
  const { stdout } = await run('bash', [join(ROOT, 'scripts/install-spire.sh')], { maxBuffer: 1 << 20 });
  return stdout.trim().split('\n').pop()!;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} did not happen in ${timeoutMs} ms: ${String(last)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function start(binary: string, args: string[], output: string[]): ChildProcess {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (b: Buffer) => {
    output.push(b.toString());
    if (output.length > 200) output.shift();
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return child;
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/** Starts spire-server and a join-token-attested spire-agent. */
export async function startTestSpire(): Promise<TestSpire> {
  const bin = await spireDir();
  const server = join(bin, 'spire-server');
  const agent = join(bin, 'spire-agent');
  if (!existsSync(server) || !existsSync(agent)) throw new Error(`no SPIRE binaries in ${bin}`);
  const dir = await mkdtemp(join(tmpdir(), 'amf-spire-'));
  const serverSock = join(dir, 'server.sock');
  const agentSock = join(dir, 'agent.sock');
  const port = await freePort();
  const output: string[] = [];
  let serverProc: ChildProcess | undefined;
  let agentProc: ChildProcess | undefined;
  const close = async () => {
    await stop(agentProc);
    await stop(serverProc);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await writeFile(
      join(dir, 'server.conf'),
      `server {
  bind_address = "127.0.0.1"
  bind_port = "${port}"
  socket_path = "${serverSock}"
  trust_domain = "${TRUST_DOMAIN}"
  data_dir = "${join(dir, 'server-data')}"
  log_level = "WARN"
  default_jwt_svid_ttl = "5m"
}
plugins {
  DataStore "sql" {
    plugin_data {
      database_type = "sqlite3"
      connection_string = "${join(dir, 'datastore.sqlite3')}"
    }
  }
  KeyManager "memory" { plugin_data {} }
  NodeAttestor "join_token" { plugin_data {} }
}
`,
    );
    serverProc = start(server, ['run', '-config', join(dir, 'server.conf')], output);
    await until('spire-server healthy', async () => {
      await run(server, ['healthcheck', '-socketPath', serverSock]);
      return true;
    });
    const { stdout } = await run(server, ['token', 'generate', '-socketPath', serverSock, '-ttl', '600']);
    const token = /Token:\s*(\S+)/.exec(stdout)?.[1];
    if (!token) throw new Error(`spire-server token generate said: ${stdout}`);
    await writeFile(
      join(dir, 'agent.conf'),
      `agent {
  data_dir = "${join(dir, 'agent-data')}"
  log_level = "WARN"
  server_address = "127.0.0.1"
  server_port = "${port}"
  socket_path = "${agentSock}"
  trust_domain = "${TRUST_DOMAIN}"
  insecure_bootstrap = true
}
plugins {
  NodeAttestor "join_token" { plugin_data {} }
  KeyManager "memory" { plugin_data {} }
  WorkloadAttestor "unix" { plugin_data {} }
}
`,
    );
    agentProc = start(agent, ['run', '-config', join(dir, 'agent.conf'), '-joinToken', token], output);
    await until('spire-agent healthy', async () => {
      await run(agent, ['healthcheck', '-socketPath', agentSock]);
      return true;
    });
    const parentId = `spiffe://${TRUST_DOMAIN}/spire/agent/join_token/${token}`;
    return {
      socket: `unix://${agentSock}`,
      async register(entry) {
        const args = [
          'entry',
          'create',
          '-socketPath',
          serverSock,
          '-parentID',
          parentId,
          '-spiffeID',
          entry.spiffeId,
        ];
        for (const s of entry.selectors) args.push('-selector', s);
        if (entry.jwtSvidTtlSeconds !== undefined) args.push('-jwtSVIDTTL', String(entry.jwtSvidTtlSeconds));
        await run(server, args);
      },
      async serverCommand(args) {
        return (await run(server, [...args, '-socketPath', serverSock])).stdout;
      },
      close,
    };
  } catch (err) {
    const log = output.join('').slice(-4000);
    await close();
    throw new Error(`${(err as Error).message}\n--- SPIRE output ---\n${log}`);
  }
}
