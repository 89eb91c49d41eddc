/**
 * How the CLI finds the operator key it sends to the coordinator, in one place: `--api-key` >
 * `AMF_API_KEY` > `<data-dir>/operator.key` (the first two are merged by the configuration; the file
 * is what `amf up` generated when given neither). So the owner's CLI copies nothing.
 */
import { networkInterfaces } from 'node:os';
import type { AmfConfig } from '../config/config.js';
import { readOperatorKey } from '../identity/operatorKey.js';
import { bareHost, canonicalHost, isLoopbackHost } from '../net/hostRules.js';

/** `--api-key` help: the flag works, but the environment variable is the safe way to pass a secret. */
export const API_KEY_FLAG_HELP =
  '(prefer AMF_API_KEY: a flag is readable by every local user in /proc/<pid>/cmdline)';

/** Printed once to stderr when `--api-key` is used. */
export function warnApiKeyFlag(): void {
  process.stderr.write(
    'amf: warning: --api-key is readable by every local user (ps, /proc/<pid>/cmdline); set AMF_API_KEY instead\n',
  );
}

/**
 * True when `url` names this machine: loopback, or an address of one of its interfaces. The key file
 * is this machine's operator key; a coordinator elsewhere (a typo in `AMF_COORDINATOR_URL`, a
 * hostile name) must not receive it. Names other than `localhost` are not resolved, so they do not
 * count: give such a coordinator its key with AMF_API_KEY.
 */
export function isThisMachine(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return false;
  }
  if (isLoopbackHost(host)) return true;
  const wanted = canonicalHost(bareHost(host));
  return Object.values(networkInterfaces()).some((addresses) =>
    (addresses ?? []).some((a) => canonicalHost(a.address) === wanted),
  );
}

/**
 * `config` with the key its client commands send: the configured one (flag, environment, file), else
 * the one in `<data-dir>/operator.key` when the coordinator is on this machine, else none.
 */
export async function withOperatorKey(config: AmfConfig): Promise<AmfConfig> {
  if (config.coordinator.apiKey !== null || !isThisMachine(config.coordinator.url)) return config;
  let key: string | undefined;
  try {
    key = await readOperatorKey(config.dataDir);
  } catch (err) {
    // Unreadable (another user's data dir): the request goes without, and its 401 says what to do.
    process.stderr.write(
      `amf: warning: cannot read the operator key in ${config.dataDir}: ${(err as Error).message}\n`,
    );
  }
  if (key === undefined) return config;
  return Object.freeze({ ...config, coordinator: Object.freeze({ ...config.coordinator, apiKey: key }) });
}
