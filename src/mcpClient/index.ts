/** The MCP client of AMF agents: the hub, its limits and its transports. */
export * from './mcpClientHub.js';
export * from './limits.js';
export { createGuardedFetch, type GuardedFetchOptions } from '../net/guardedFetch.js';
export {
  ClearedEnvStdioTransport,
  clearedEnvironment,
  resolveCommand,
  type StdioServerParams,
} from './stdioTransport.js';
