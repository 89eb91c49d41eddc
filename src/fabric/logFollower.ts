/**
 * Follows a growing text file line by line, from its end at start (what was logged before is not
 * news), like `tail -F`: a file that is truncated is read again from its start, one replaced by
 * another (rotation: a new inode) is reopened, one that does not exist yet is waited for. Polls on
 * a timer rather than fs.watch, which misses changes on some filesystems and across renames.
 * Bounded: at most `maxBytesPerPoll` per poll, and a line longer than `maxLineBytes` is cut.
 */
import { open, stat } from 'node:fs/promises';

export interface LogFollowerOptions {
  path: string;
  onLine: (line: string) => void;
  /** Called once per distinct problem (missing file, unreadable), not on every poll. */
  onProblem?: (message: string) => void;
  pollMs?: number;
  maxBytesPerPoll?: number;
  maxLineBytes?: number;
}

export interface LogFollower {
  /** Reads what is new now (tests; the timer does the same). */
  poll(): Promise<void>;
  close(): void;
}

const DEFAULT_POLL_MS = 500;
const DEFAULT_MAX_BYTES_PER_POLL = 1024 * 1024;
const DEFAULT_MAX_LINE_BYTES = 64 * 1024;

export async function followLog(options: LogFollowerOptions): Promise<LogFollower> {
  const maxBytes = options.maxBytesPerPoll ?? DEFAULT_MAX_BYTES_PER_POLL;
  const maxLine = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  let inode: number | undefined;
  let offset = 0;
  let partial = '';
  let lastProblem = '';
  let running: Promise<void> | undefined;
  let closed = false;

  const problem = (message: string): void => {
    if (message !== lastProblem) options.onProblem?.(message);
    lastProblem = message;
  };

  const emit = (text: string): void => {
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    if (partial.length > maxLine) partial = partial.slice(0, maxLine);
    for (const line of lines) options.onLine(line.length > maxLine ? line.slice(0, maxLine) : line);
  };

  const readNew = async (): Promise<void> => {
    let info;
    try {
      info = await stat(options.path);
    } catch (err) {
      problem(`cannot read ${options.path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      return;
    }
    lastProblem = '';
    if (inode !== info.ino || info.size < offset) {
      // A new file (rotated) or a truncated one: its content is all new.
      inode = info.ino;
      offset = 0;
      partial = '';
    }
    if (info.size === offset) return;
    const length = Math.min(info.size - offset, maxBytes);
    const handle = await open(options.path, 'r');
    try {
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buffer, 0, length, offset);
      offset += bytesRead;
      emit(buffer.subarray(0, bytesRead).toString('utf8'));
    } finally {
      await handle.close();
    }
  };

  const poll = async (): Promise<void> => {
    if (closed) return;
    running ??= readNew()
      .catch((err: unknown) => problem(`cannot read ${options.path}: ${String(err)}`))
      .finally(() => {
        running = undefined;
      });
    await running;
  };

  // Start at the end: what the server logged before this follower existed is not reported.
  try {
    const info = await stat(options.path);
    inode = info.ino;
    offset = info.size;
  } catch (err) {
    problem(`cannot read ${options.path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  const timer = setInterval(() => void poll(), options.pollMs ?? DEFAULT_POLL_MS);
  timer.unref();
  return {
    poll,
    close: () => {
      closed = true;
      clearInterval(timer);
    },
  };
}
