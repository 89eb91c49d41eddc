/**
 * What the mesh knows about nats-server versions. Debian's nats-server (2.9.x) runs the mesh, but
 * its file store gets slower as a long-running mesh's streams fill: its CPU per task keeps growing
 * and the mesh's throughput falls, while 2.12 stays flat (docs/performance.md). Operators are told,
 * not refused.
 */

/** Releases older than this slow down as task states and events accumulate. */
export const STEADY_FILESTORE_SINCE = [2, 10, 0] as const;

/** Releases from which a stream can be stored compressed (S2). */
export const COMPRESSED_STORES_SINCE = [2, 10, 0] as const;

/** The three numbers of a version string such as `2.9.10` or `v2.12.15`; undefined when absent. */
export function parseServerVersion(text: string | undefined): [number, number, number] | undefined {
  const match = /v?(\d+)\.(\d+)\.(\d+)/.exec(text ?? '');
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

/** Compares dotted version numbers: negative, zero or positive. */
export function compareVersions(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** Why `version` is a poor choice for a mesh that runs for long; undefined when it is fine. */
export function slowStoreReason(version: readonly number[]): string | undefined {
  if (compareVersions(version, STEADY_FILESTORE_SINCE) >= 0) return undefined;
  return (
    'slows down as a mesh runs: its file store costs more per task as task states and events ' +
    'accumulate, and it cannot store streams compressed (docs/performance.md)'
  );
}

/** The start-up warning about `version`, with the fix; undefined when it is fine. */
export function slowStoreWarning(version: readonly number[]): string | undefined {
  const reason = slowStoreReason(version);
  return (
    reason &&
    `nats-server ${version.join('.')} ${reason}. Use ${STEADY_FILESTORE_SINCE.join('.')} or newer: ` +
      'bash scripts/install-nats.sh prints the path of one for AMF_NATS_SERVER_BIN (npm start uses it once installed)'
  );
}
