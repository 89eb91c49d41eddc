// Writes the nats-server configs of a local N-node cluster for scripts/cluster.sh and prints one
// line per node: "<node name> <config path>", then "URLS <comma-separated client URLs>".
// It imports AMF's own renderer from dist/ (run `npm run build` first), so the users, ACLs and
// credentials are exactly those of the single server `amf up` spawns: <data-dir>/credentials.json
// is read, or created (honouring AMF_*_PASS) when absent, as `amf up` would. With --auth-callout the
// nodes send every login but the role users' to the coordinators (NATS auth callout), whose issuer key
// is <data-dir>/callout.nkey (or $AMF_CALLOUT_KEY_FILE), created here when absent.
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { parseArgs } from 'node:util';
import { calloutKeyFile, loadOrCreateCalloutIssuer } from '../dist/identity/calloutIssuer.js';
import {
  loadOrCreateCredentials,
  loadOrCreateSystemCredential,
  writePrivateFile,
} from '../dist/fabric/credentials.js';
import {
  clusterClientUrls,
  planCluster,
  renderClusterNodeConfig,
} from '../dist/fabric/natsServer/cluster.js';

const { values } = parseArgs({
  options: {
    dir: { type: 'string' },
    'data-dir': { type: 'string' },
    nodes: { type: 'string', default: '3' },
    host: { type: 'string', default: '127.0.0.1' },
    'client-port': { type: 'string', default: '4222' },
    'route-port': { type: 'string', default: '6222' },
    'auth-callout': { type: 'boolean', default: false },
  },
  strict: true,
});

function usage(message) {
  process.stderr.write(
    `cluster-config.mjs: ${message}\n` +
      'usage: node scripts/cluster-config.mjs --dir DIR --data-dir DATA_DIR [--nodes 3] [--host 127.0.0.1] ' +
      '[--client-port 4222] [--route-port 6222] [--auth-callout]\n',
  );
  process.exit(2);
}

function int(name, min, max) {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < min || n > max) usage(`--${name} must be an integer in ${min}..${max}`);
  return n;
}

if (!values.dir) usage('--dir is required');
if (!values['data-dir']) usage('--data-dir is required');
const nodes = int('nodes', 1, 7);
const clientPort = int('client-port', 1, 65535 - nodes);
const routePort = int('route-port', 1, 65535 - nodes);
const dir = resolve(values.dir);
const range = (base) => Array.from({ length: nodes }, (_, i) => base + i);
if (range(clientPort).some((p) => range(routePort).includes(p))) usage('client and route ports overlap');

const dataDir = resolve(values['data-dir']);
const credentials = await loadOrCreateCredentials(dataDir);
const issuer = values['auth-callout'] ? await loadOrCreateCalloutIssuer(calloutKeyFile(dataDir)) : undefined;
// With the callout, a system-account user (<data-dir>/system.json) lets the coordinators close a
// revoked agent's connections at once instead of at its user JWT's expiry.
const renderOptions = issuer
  ? {
      calloutIssuer: issuer.publicKey,
      calloutXkey: issuer.xkeyPublicKey,
      systemUser: await loadOrCreateSystemCredential(dataDir),
    }
  : {};
const plan = planCluster({
  dir,
  clientPorts: range(clientPort),
  routePorts: range(routePort),
  host: values.host,
});
for (const [i, node] of plan.nodes.entries()) {
  await mkdir(node.storeDir, { recursive: true, mode: 0o700 });
  // The config holds every role's password: owner-only, like credentials.json.
  const path = join(node.storeDir, 'nats-server.conf');
  await writePrivateFile(path, renderClusterNodeConfig(plan, i, credentials, renderOptions));
  process.stdout.write(`${node.name} ${path}\n`);
}
if (issuer) process.stdout.write(`CALLOUT ${issuer.publicKey} ${issuer.file}\n`);
process.stdout.write(`URLS ${clusterClientUrls(plan)}\n`);
