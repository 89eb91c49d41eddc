/**
 * A simulated LAN for tests: N hosts, each a network namespace of its own with one interface
 * (`eth0`, 10.77.0.<i>/24), all plugged into a bridge that lives in one more namespace (the switch).
 * Every namespace is held by a `sleep` process made with `unshare -n`, so nothing is mounted and
 * nothing is left behind: close() kills the holders and the kernel removes the namespaces, their
 * interfaces and the bridge. The test's own namespace is not touched. Multicast is routed to eth0 in
 * every host, so mDNS crosses the bridge as it would a real switch, and never reaches this machine's
 * real network. Needs root (tests run as root inside `unshare -n`, see scripts/test.sh). Used by test/lan and
 * bench/lan.js; `scripts/lan-sim.sh` opens a shell on one of its hosts.
 */
import { spawn, spawnSync } from 'node:child_process';

/** True when this process may build namespaces (root, with unshare and nsenter). */
export function canSimulateLan() {
  if (process.getuid?.() !== 0) return false;
  return (
    spawnSync('unshare', ['-n', 'true']).status === 0 && spawnSync('nsenter', ['--version']).status === 0
  );
}

function holder() {
  // The namespace lives as long as this process; stdio ignored so it never holds a test's pipes.
  const child = spawn('unshare', ['-n', 'sleep', 'infinity'], { stdio: 'ignore' });
  if (child.pid === undefined) throw new Error('unshare -n did not start');
  return child;
}

function inNamespace(pid, command, args) {
  const result = spawnSync('nsenter', ['-t', String(pid), '-n', '--', command, ...args], {
    encoding: 'utf8',
  });
  if (result.status !== 0)
    throw new Error(
      `${command} ${args.join(' ')} in namespace ${pid}: ${result.stderr || result.error?.message}`,
    );
  return result.stdout;
}

/** `unshare -n` forks before the namespace exists: wait until the holder's namespace differs from ours. */
function waitUntilSeparate(pid) {
  for (let i = 0; i < 200; i++) {
    const ours = spawnSync('readlink', ['/proc/self/ns/net'], { encoding: 'utf8' }).stdout.trim();
    const theirs = spawnSync('readlink', [`/proc/${pid}/ns/net`], { encoding: 'utf8' }).stdout.trim();
    const comm = spawnSync('cat', [`/proc/${pid}/comm`], { encoding: 'utf8' }).stdout.trim();
    if (theirs && theirs !== ours && comm === 'sleep') return;
    spawnSync('sleep', ['0.02']);
  }
  throw new Error(`namespace holder ${pid} did not come up`);
}

/** Builds a LAN of `count` hosts (10.77.0.1 … 10.77.0.<count>). */
export function startLan(count, subnet = '10.77.0') {
  const holders = [];
  try {
    const sw = holder();
    holders.push(sw);
    waitUntilSeparate(sw.pid);
    const switchPid = sw.pid;
    inNamespace(switchPid, 'ip', ['link', 'add', 'br0', 'type', 'bridge']);
    inNamespace(switchPid, 'ip', ['link', 'set', 'br0', 'up']);
    const hosts = [];
    for (let i = 1; i <= count; i++) {
      const h = holder();
      holders.push(h);
      waitUntilSeparate(h.pid);
      const pid = h.pid;
      const port = `p${i}`;
      inNamespace(switchPid, 'ip', ['link', 'add', port, 'type', 'veth', 'peer', 'name', `e${i}`]);
      inNamespace(switchPid, 'ip', ['link', 'set', `e${i}`, 'netns', String(pid)]);
      inNamespace(switchPid, 'ip', ['link', 'set', port, 'master', 'br0']);
      inNamespace(switchPid, 'ip', ['link', 'set', port, 'up']);
      const address = `${subnet}.${i}`;
      inNamespace(pid, 'ip', ['link', 'set', 'lo', 'up']);
      inNamespace(pid, 'ip', ['link', 'set', `e${i}`, 'name', 'eth0']);
      inNamespace(pid, 'ip', ['addr', 'add', `${address}/24`, 'dev', 'eth0']);
      inNamespace(pid, 'ip', ['link', 'set', 'eth0', 'multicast', 'on']);
      inNamespace(pid, 'ip', ['link', 'set', 'eth0', 'up']);
      inNamespace(pid, 'ip', ['route', 'add', '224.0.0.0/4', 'dev', 'eth0']);
      hosts.push({
        name: `host${i}`,
        address,
        pid,
        port,
        spawn: (command, args, options = {}) =>
          spawn('nsenter', ['-t', String(pid), '-n', '--', command, ...args], options),
        run: (command, args) => inNamespace(pid, command, args),
      });
    }
    const linkOf = (host) => hosts.find((h) => h.name === host.name).port;
    return {
      hosts,
      cut: (host) => void inNamespace(switchPid, 'ip', ['link', 'set', linkOf(host), 'down']),
      heal: (host) => void inNamespace(switchPid, 'ip', ['link', 'set', linkOf(host), 'up']),
      close: () => {
        for (const h of holders) h.kill('SIGKILL');
      },
    };
  } catch (err) {
    for (const h of holders) h.kill('SIGKILL');
    throw err;
  }
}
