/** The errors of starting nats-server that a user can act on, with the flags that fix them. */
import { describePortOwner } from './portOwner.js';
import { AmfError } from '../../errors.js';

/** Raised when the nats-server binary cannot be found; the message says how to install it. */
export class NatsServerMissingError extends AmfError {
  declare readonly code: 'NATS_SERVER_MISSING';
  readonly binary: string;

  constructor(binary: string, options?: ErrorOptions) {
    super(
      'NATS_SERVER_MISSING',
      `nats-server binary "${binary}" was not found. Install it with "apt-get install -y nats-server" (Debian/Ubuntu) ` +
        `or "go install github.com/nats-io/nats-server/v2@latest", or point AMF_NATS_SERVER_BIN at it, ` +
        `or use an existing NATS with --nats-url`,
      undefined,
      options,
    );
    this.name = 'NatsServerMissingError';
    this.binary = binary;
  }
}

/** The host:port a nats-server's bind failure names. */
function portInUseAddress(output: string): string | undefined {
  const addr = /Listening for client connections on ([^\s]+)|listen tcp ([^\s]+:\d+)/.exec(output);
  return addr?.[1] ?? addr?.[2];
}

/** Names the holder of the address a bind failure names (best effort, see portOwner.ts). */
export async function portOwnerOf(output: string): Promise<string | undefined> {
  const where = /^(.*):(\d+)$/.exec(portInUseAddress(output) ?? '');
  if (!where) return undefined;
  const host = where[1]!.replace(/^\[|\]$/g, '');
  return describePortOwner(host === '0.0.0.0' || host === '' ? '127.0.0.1' : host, Number(where[2]));
}

/**
 * Raised when the spawned server cannot bind its port: one line naming the flags to use, instead of
 * the server's log (which is kept as `details.output` for whoever wants it).
 */
export class NatsPortInUseError extends AmfError {
  declare readonly code: 'UNAVAILABLE';

  constructor(output: string, owner?: string) {
    const where = portInUseAddress(output) ?? 'its port';
    super(
      'UNAVAILABLE',
      `nats-server cannot listen on ${where}: the address is already in use by ${owner ?? 'another program (another amf up?)'}. ` +
        `Choose another port with --nats-port (0 = any free port), or share that NATS with --nats-url`,
      { output },
    );
    this.name = 'NatsPortInUseError';
  }
}
