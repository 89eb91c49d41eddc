/**
 * The port an agent (`amf worker`, `amf run`) listens on. Many agents share one machine, so the
 * default port (8766, the contract's example) is a preference: when another program holds it, the
 * agent takes any free port instead and says so; its advertisement and card carry the port it got.
 * A port the user chose (`--port N`, or a configured `worker.port` other than the default) is
 * taken exactly, and a taken one fails naming what holds it and the fix (`--port 0`).
 */
import { createServer } from 'node:net';
import { AmfError } from '../errors.js';
import { describePortOwner } from '../fabric/natsServer/portOwner.js';
import { plainGet } from './plainGet.js';

/** The worker port when none is chosen (config `worker.port` default, DESIGN.md section 3). */
export const DEFAULT_AGENT_PORT = 8766;
const HEALTH_TIMEOUT_MS = 1000;

/** Where the agent listens, and what to tell the user when it is not where they might expect. */
export interface AgentPortChoice {
  port: number;
  /** Set when the default port was taken and any free port is used instead. */
  note?: string;
}

/** Rejects with the listen error (EADDRINUSE...) when host:port cannot be bound right now. */
function probe(host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()));
  });
}

function probeHost(host: string): string {
  return host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host;
}

/**
 * Names what listens on host:port: an AMF agent or coordinator by what its `/health` says (both
 * answer it without a key), else the process /proc shows holding the socket, else "another program".
 */
export async function describePortHolder(host: string, port: number): Promise<string> {
  const h = probeHost(host);
  try {
    // Unpooled (plainGet.ts): a failed start must not wait for a keep-alive socket to close.
    const res = await plainGet(
      new URL(`http://${h.includes(':') ? `[${h}]` : h}:${port}/health`),
      {},
      HEALTH_TIMEOUT_MS,
    );
    const body = JSON.parse(res.text) as { agent_id?: unknown; agent?: unknown; instance_id?: unknown };
    if (typeof body.agent_id === 'string') return `the AMF agent ${body.agent_id}`;
    if (typeof body.agent === 'string') return `the AFM agent "${body.agent}"`;
    if (typeof body.instance_id === 'string') return `an AMF coordinator (instance ${body.instance_id})`;
  } catch {
    // Not an AMF edge (or not HTTP at all): the process table may still say who it is.
  }
  return (await describePortOwner(h, port).catch(() => undefined)) ?? 'another program';
}

/** The error for a port the user chose that another program holds. */
export async function portInUseError(host: string, port: number, cause?: unknown): Promise<AmfError> {
  return new AmfError(
    'UNAVAILABLE',
    `port ${port} on ${host} is already in use by ${await describePortHolder(host, port)}: ` +
      'stop it, or pass --port 0 to listen on any free port (the advertisement and card carry the port it gets)',
    { port },
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Chooses the port: `port` when free; when taken, any free port if `port` is the default nobody
 * chose (with a note saying so), else the error of {@link portInUseError}. Errors other than a
 * taken port (a host this machine does not have) are left to the listen that follows.
 */
export async function chooseAgentPort(options: {
  host: string;
  port: number;
  /** The user chose the port (flag, or a configured value other than the default). */
  chosen: boolean;
}): Promise<AgentPortChoice> {
  const { host, port, chosen } = options;
  if (port === 0) return { port };
  try {
    await probe(host, port);
    return { port };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') return { port };
    if (chosen) throw await portInUseError(host, port, err);
    return {
      port: 0,
      note: `port ${port} is in use by ${await describePortHolder(host, port)}: listening on any free port instead (--port N chooses one)`,
    };
  }
}

/** A listen that failed after the choice (the port taken in between): explained as a taken port. */
export async function explainListenFailure(err: unknown, host: string, port: number): Promise<unknown> {
  if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || port === 0) return err;
  return portInUseError(host, port, err);
}
