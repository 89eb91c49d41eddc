/**
 * Who holds a TCP port we could not bind: named in the one-line error of a second `amf up`, so the
 * user knows which instance (data dir) runs there. On Linux the listening socket is traced through
 * /proc to its process and command line (an AMF nats-server is started with
 * `-c <data dir>/nats/nats-server.conf`); elsewhere, or when /proc says nothing, a nats-server is
 * recognised by the INFO line it sends to every client. Best effort: undefined when nothing is known.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { basename, dirname } from 'node:path';

const PROBE_TIMEOUT_MS = 1000;
/** Processes looked at, at most: the search must stay quick on a busy machine. */
const MAX_PROCESSES = 4000;
const AMF_CONFIG_TAIL = '/nats/nats-server.conf';

/** Inodes of the sockets listening on `port` (state 0A in /proc/net/tcp and tcp6). */
async function listeningInodes(port: number): Promise<Set<string>> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9 && cols[1]?.endsWith(`:${hexPort}`) && cols[3] === '0A') inodes.add(cols[9]!);
    }
  }
  return inodes;
}

/** The process holding one of `inodes` open, if /proc lets us see it. */
async function processWith(inodes: Set<string>): Promise<number | undefined> {
  const pids = (await readdir('/proc').catch(() => [] as string[])).filter((d) => /^\d+$/.test(d));
  for (const pid of pids.slice(0, MAX_PROCESSES)) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode !== undefined && inodes.has(inode)) return Number(pid);
    }
  }
  return undefined;
}

function describeProcess(pid: number, argv: string[]): string {
  const program = basename(argv[0] ?? '');
  const config = argv[argv.indexOf('-c') + 1];
  if (program.includes('nats-server') && argv.includes('-c') && config?.endsWith(AMF_CONFIG_TAIL))
    return `the nats-server of the AMF mesh with data dir ${dirname(dirname(config))} (pid ${pid})`;
  return `${program || 'a process'} (pid ${pid}: ${argv.join(' ').slice(0, 160)})`;
}

async function ownerFromProc(port: number): Promise<string | undefined> {
  const inodes = await listeningInodes(port);
  if (inodes.size === 0) return undefined;
  const pid = await processWith(inodes);
  if (pid === undefined) return undefined;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return `pid ${pid}`;
  return describeProcess(
    pid,
    cmdline.split('\0').filter((a) => a.length > 0),
  );
}

/** The INFO line a nats-server sends on connect: its name and version. */
function ownerFromInfo(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let buffer = '';
    const socket = connect({ host, port });
    const done = (answer: string | undefined) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => done(undefined));
    socket.on('error', () => done(undefined));
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      const end = buffer.indexOf('\r\n');
      if (end < 0) return buffer.length > 64 * 1024 ? done(undefined) : undefined;
      const line = buffer.slice(0, end);
      if (!line.startsWith('INFO ')) return done(undefined);
      try {
        const info = JSON.parse(line.slice(5)) as { server_name?: unknown; version?: unknown };
        done(`a nats-server ${String(info.version ?? '')} named ${String(info.server_name ?? '?')}`);
      } catch {
        done(undefined);
      }
    });
  });
}

/** Names what listens on host:port, or undefined when it cannot be told. */
export async function describePortOwner(host: string, port: number): Promise<string | undefined> {
  if (!Number.isInteger(port) || port <= 0 || port > 65_535) return undefined;
  return (await ownerFromProc(port).catch(() => undefined)) ?? (await ownerFromInfo(host, port));
}
