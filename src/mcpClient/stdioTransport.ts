/**
 * A stdio client transport for MCP servers started as child processes, written here instead of
 * using the SDK's StdioClientTransport because that one always merges a default environment (HOME,
 * PATH, USER, ...) into the child's: AMF starts servers with a cleared environment holding only the
 * variables a server entry lists (OpenFang's `env = [...]` rule), so secrets in the agent's own
 * environment never leak to third-party tool servers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { AmfError, toAmfError } from '../errors.js';
import { checkStdioCommand, MAX_MCP_MESSAGE_BYTES } from './limits.js';

/** What starts one stdio MCP server. */
export interface StdioServerParams {
  /** Server name, used in error messages. */
  name: string;
  command: string;
  args: readonly string[];
  /** Names of variables copied from `parentEnv`; nothing else reaches the child (not even PATH). */
  env: readonly string[];
  /** Where the listed variables and the PATH used to find `command` come from (default process.env). */
  parentEnv?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Called with each chunk of the child's stderr (already bounded); default: ignored. */
  onStderr?: (text: string) => void;
  /** Largest buffered message in bytes (default 10 MB). */
  maxMessageBytes?: number;
}

/**
 * Resolves a bare command name against the PARENT's PATH. The child gets no PATH unless listed, and
 * a spawn without PATH only searches /bin:/usr/bin, so `node` or `npx` would otherwise not be found;
 * resolving here keeps "only listed variables" strict without making common commands unusable.
 */
export function resolveCommand(command: string, parentEnv: NodeJS.ProcessEnv): string {
  if (command.includes('/') || command.includes('\\')) return command;
  for (const dir of (parentEnv.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return command;
}

/** Builds the child's environment: exactly the listed names that are set in `parentEnv`. */
export function clearedEnvironment(
  names: readonly string[],
  parentEnv: NodeJS.ProcessEnv,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of names) {
    const value = parentEnv[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** MCP client transport over a child process's stdin/stdout (newline-delimited JSON-RPC). */
export class ClearedEnvStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private child: ChildProcess | undefined;
  private readonly buffer: ReadBuffer;
  /** Messages read but not yet handed to the client (see `deliver`). */
  private readonly inbox: JSONRPCMessage[] = [];
  private delivering = false;
  private closed = false;

  constructor(private readonly params: StdioServerParams) {
    checkStdioCommand(params.name, params.command);
    this.buffer = new ReadBuffer({ maxBufferSize: params.maxMessageBytes ?? MAX_MCP_MESSAGE_BYTES });
  }

  /** Process id of the server, once started (tests use it to check the child is gone). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Spawns the server; resolves once the process is running, rejects if it cannot start. */
  start(): Promise<void> {
    if (this.child) throw new AmfError('INTERNAL', 'ClearedEnvStdioTransport already started');
    const parentEnv = this.params.parentEnv ?? process.env;
    const command = resolveCommand(this.params.command, parentEnv);
    return new Promise((resolve, reject) => {
      const child = spawn(command, [...this.params.args], {
        env: clearedEnvironment(this.params.env, parentEnv),
        stdio: ['pipe', 'pipe', 'pipe'],
        shell: false,
        windowsHide: true,
        ...(this.params.cwd ? { cwd: this.params.cwd } : {}),
      });
      this.child = child;
      child.once('error', (err) => {
        const error = new AmfError(
          'UNAVAILABLE',
          `MCP server "${this.params.name}": cannot start ${command}: ${err.message}`,
        );
        reject(error);
        this.onerror?.(error);
        this.finish();
      });
      child.once('spawn', () => resolve());
      child.once('close', () => this.finish());
      child.stdin!.on('error', (err) => this.onerror?.(err));
      child.stdout!.on('data', (chunk: Buffer) => this.receive(chunk));
      child.stdout!.on('error', (err) => this.onerror?.(err));
      child.stderr!.setEncoding('utf8');
      child.stderr!.on('data', (text: string) => this.params.onStderr?.(text.slice(0, 4096)));
    });
  }

  private receive(chunk: Buffer): void {
    try {
      this.buffer.append(chunk);
    } catch {
      // A server that sends an endless line would grow our memory without bound: drop it instead.
      this.onerror?.(
        new AmfError(
          'PAYLOAD_TOO_LARGE',
          `MCP server "${this.params.name}": message larger than ${this.params.maxMessageBytes ?? MAX_MCP_MESSAGE_BYTES} bytes; connection closed`,
        ),
      );
      void this.close();
      return;
    }
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (err) {
        // One malformed line (e.g. a stray print) is reported, not fatal.
        this.onerror?.(err instanceof Error ? err : toAmfError(err));
        continue;
      }
      if (message === null) break;
      this.inbox.push(message);
    }
    if (!this.delivering) this.deliver();
  }

  /**
   * Hands the received messages to the client one per turn of the event loop. The SDK's protocol
   * layer runs a notification's handler a microtask later but settles a response at once: given
   * a request's progress notifications and its response in one read (a fast server), it would
   * settle the request first and drop its progress as "unknown token".
   */
  private deliver(): void {
    const message = this.inbox.shift();
    if (message === undefined) {
      this.delivering = false;
      return;
    }
    this.delivering = true;
    this.onmessage?.(message);
    if (this.inbox.length === 0) this.delivering = false;
    else setImmediate(() => this.deliver());
  }

  /** Writes one message as a JSON line, honouring back-pressure. */
  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.closed)
      return Promise.reject(new AmfError('UNAVAILABLE', `MCP server "${this.params.name}" is not running`));
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** Ends stdin (the polite stop for stdio servers), then SIGTERM and SIGKILL if the child lingers. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child || this.closed) return;
    if (child.exitCode !== null || child.signalCode !== null) return this.finish();
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    child.stdin?.end();
    const term = setTimeout(() => child.kill('SIGTERM'), 2000);
    const kill = setTimeout(() => child.kill('SIGKILL'), 4000);
    await exited;
    clearTimeout(term);
    clearTimeout(kill);
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.inbox.length = 0;
    this.onclose?.();
  }
}
