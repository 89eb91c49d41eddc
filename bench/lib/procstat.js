/**
 * Per-process CPU time and memory from /proc (Linux). Other platforms get `undefined` everywhere and
 * the report says "n/a".
 */
import { readFileSync } from 'node:fs';

// USER_HZ is 100 on every mainstream Linux build; /proc/<pid>/stat counts in these ticks.
const TICK_MS = 10;

/** User + system CPU time of a process in ms, or undefined. */
export function cpuMs(pid) {
  if (!pid) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces: count fields from the closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return undefined;
  }
}

/** VmRSS, VmHWM (peak RSS), RssAnon and RssFile (mapped files: the node binary) of a process in bytes, or undefined. */
export function memoryOf(pid) {
  if (!pid) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name) => {
      const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
      return m ? Number(m[1]) * 1024 : undefined;
    };
    return { rss: kb('VmRSS'), peak: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') };
  } catch {
    return undefined;
  }
}

/** True while `pid` exists. */
export function alive(pid) {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return /** @type {NodeJS.ErrnoException} */ (err).code === 'EPERM';
  }
}

/** CPU time (ms) all CPUs spent busy since boot (user, nice, system, irq, softirq, steal), or undefined. */
export function machineBusyMs() {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
    const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
    return (user + nice + system + irq + softirq + steal) * TICK_MS;
  } catch {
    return undefined;
  }
}

/** read()- and write()-family system calls made so far by a process (/proc/<pid>/io), or undefined. */
export function syscallsOf(pid) {
  if (!pid) return undefined;
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const n = (name) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(io)?.[1]);
    return n('syscr') + n('syscw');
  } catch {
    return undefined;
  }
}
