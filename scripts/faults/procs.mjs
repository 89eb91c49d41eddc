/**
 * Child processes of the fault drill. Every process the drill starts runs in its own process group
 * (detached), so one kill(-pgid) also reaches whatever it spawned (the coordinator's nats-server),
 * and a registry of live groups lets the drill clean up on any exit path, a crash included.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';

/** Process groups started by the drill and not yet seen to exit. */
const liveGroups = new Set();
/**
 * Paths the drill owns (its temp dir). A process naming one in its command line is the drill's even
 * when it left our process groups: the coordinator starts nats-server in a group of its own
 * (detached, so a Ctrl-C reaches the coordinator alone), and a SIGKILLed coordinator leaves it with
 * ppid 1. The sweep below ends those too.
 */
const ownedPaths = new Set();

/** Marks `path` as the drill's: every process whose command line names it is ended on cleanup. */
export function ownPath(path) {
  ownedPaths.add(path);
}

/** Sends `signal` to a whole process group; a group that is already gone is not an error. */
export function signalGroup(pgid, signal) {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Sends `signal` to one process (not its group), as a crash of that process alone would. */
export function signalPid(pid, signal) {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * SIGKILLs every group still alive. Synchronous so it also works from an 'exit' handler; SIGCONT
 * is not needed because SIGKILL ends stopped processes too.
 */
export function killAllGroups() {
  for (const pgid of liveGroups) signalGroup(pgid, 'SIGKILL');
  liveGroups.clear();
  for (const path of ownedPaths) killMentioningSync(path);
}

/**
 * SIGKILLs every process (but this one) whose command line contains `text`, and returns their pids.
 * Synchronous, for the same reason as killAllGroups.
 */
export function killMentioningSync(text) {
  const killed = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
    } catch {
      continue; // exited while we looked
    }
    if (cmdline.includes(text) && signalPid(Number(entry), 'SIGKILL')) killed.push(Number(entry));
  }
  return killed;
}

/** Waits (bounded) until no process names `text`; resolves with those still there at the end. */
export async function waitGone(text, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // A zombie's command line reads empty, so a killed child not yet reaped is not counted.
    const left = await processesMentioning(text);
    if (left.length === 0 || Date.now() >= deadline) return left;
    await delay(100);
  }
}

/**
 * Starts `node`-style command `cmd args` in a new process group. Output lines are kept (bounded) for
 * `waitFor` and error reports, and appended to `logFile` so a failed run can be read afterwards.
 */
export function startProcess(cmd, args, { label, env = {}, logFile, cwd } = {}) {
  const child = spawn(cmd, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${label}: could not start ${cmd}`);
  liveGroups.add(pid);
  const log = logFile ? createWriteStream(logFile, { flags: 'a' }) : undefined;
  const lines = [];
  const waiters = new Set();
  const onLine = (line) => {
    lines.push(line);
    if (lines.length > 400) lines.shift();
    log?.write(line + '\n');
    for (const w of waiters) w(line);
  };
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', onLine);
  }
  let exitInfo;
  const exited = new Promise((resolve) => {
    child.once('close', (code, signal) => {
      exitInfo = { code, signal, at: Date.now() };
      liveGroups.delete(pid);
      log?.end();
      resolve(exitInfo);
    });
  });
  child.once('error', (err) => onLine(`[drill] spawn error: ${err.message}`));

  /** Resolves with the first output line matching `re` (earlier lines included), or rejects. */
  const waitFor = (re, timeoutMs) =>
    new Promise((resolve, reject) => {
      const earlier = lines.find((l) => re.test(l));
      if (earlier !== undefined) return resolve(earlier.match(re));
      const timer = setTimeout(
        () => finish(new Error(`${label}: no line matching ${re} after ${timeoutMs} ms`)),
        timeoutMs,
      );
      const check = (line) => {
        const m = line.match(re);
        if (m) finish(undefined, m);
      };
      const finish = (err, m) => {
        clearTimeout(timer);
        waiters.delete(check);
        if (err) reject(err);
        else resolve(m);
      };
      waiters.add(check);
      void exited.then((e) => finish(new Error(`${label} exited (${e.signal ?? e.code}) before ${re}`)));
    });

  return {
    pid,
    label,
    exited,
    exitInfo: () => exitInfo,
    tail: (n = 15) => lines.slice(-n).join('\n'),
    waitFor,
    /** Signal the whole group (what a terminal's Ctrl-C or a supervisor's kill does). */
    signalGroup: (signal) => signalGroup(pid, signal),
    /** Signal this process only (a crash of this process alone). */
    signal: (signal) => signalPid(pid, signal),
    /** SIGKILL the group and wait for the leader to be reaped. */
    async kill() {
      signalGroup(pid, 'SIGKILL');
      await Promise.race([exited, delay(5000)]);
    },
  };
}

/** Processes (other than this one) whose command line contains `text`: used to find leftovers. */
export async function processesMentioning(text) {
  const found = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline;
    try {
      cmdline = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).split('\0').join(' ').trim();
    } catch {
      continue; // exited while we looked
    }
    if (cmdline.includes(text)) found.push({ pid: Number(entry), cmdline });
  }
  return found;
}

/** True when this process sees no network interface but loopback (a private network namespace). */
export async function inPrivateNetns() {
  const dev = await readFile('/proc/self/net/dev', 'utf8');
  const names = dev
    .split('\n')
    .slice(2)
    .map((l) => l.split(':')[0].trim())
    .filter((n) => n !== '');
  return names.length > 0 && names.every((n) => n === 'lo');
}
