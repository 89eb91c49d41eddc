#!/usr/bin/env bash
# A simulated LAN to try AMF across machines on one: N hosts (default 4), each a network namespace
# with eth0 = 10.77.0.<i>/24 on one bridge (scripts/lib/lanSim.mjs). Prints how to open a shell on
# each host; Ctrl-C removes every namespace, interface and the bridge. Needs root. docs/lan.md uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-4}"
exec node --input-type=module -e "
import { canSimulateLan, startLan } from './scripts/lib/lanSim.mjs';
if (!canSimulateLan()) { console.error('lan-sim: needs root, unshare and nsenter'); process.exit(1); }
const lan = startLan(Number(process.argv[1]));
console.log('Simulated LAN up. A shell on each host (run in another terminal):');
for (const h of lan.hosts) console.log('  ' + h.name + '  ' + h.address + '   nsenter -t ' + h.pid + ' -n bash');
console.log('Ctrl-C removes it all.');
const stop = () => { lan.close(); process.exit(0); };
process.on('SIGINT', stop); process.on('SIGTERM', stop);
setInterval(() => {}, 1 << 30);
" "$count"
