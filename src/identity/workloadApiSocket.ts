/**
 * Addresses of the SPIFFE Workload API socket (`SPIFFE_ENDPOINT_SOCKET`). Apart from the gRPC client
 * so that deciding the identity mode does not load gRPC: a mesh without SPIFFE never pays for it.
 */
import { AmfError } from '../errors.js';

/** `unix:///path`, `unix:/path` or a bare absolute path → the gRPC target `unix:///path`. */
export function workloadApiTarget(socket: string): string {
  if (socket.startsWith('unix://')) return `unix://${socket.slice('unix://'.length)}`;
  if (socket.startsWith('unix:')) return `unix://${socket.slice('unix:'.length)}`;
  if (socket.startsWith('/')) return `unix://${socket}`;
  throw new AmfError(
    'CONFIG_INVALID',
    `SPIFFE_ENDPOINT_SOCKET must be a unix socket address (unix:///path/to/agent.sock), got ${JSON.stringify(socket)}`,
  );
}

/** The file path of a socket address (for existence checks). */
export function workloadApiSocketPath(socket: string): string {
  return workloadApiTarget(socket).slice('unix://'.length);
}
