import type { ChildProcess, SpawnOptions } from 'node:child_process';

/** One simulated host (see lanSim.mjs). */
export interface LanHost {
  readonly name: string;
  /** Its address on the LAN (10.77.0.<i>). */
  readonly address: string;
  /** The process holding its network namespace (`nsenter -t <pid> -n` enters it). */
  readonly pid: number;
  /** Spawns `command` inside this host's network namespace (same files, same user). */
  spawn(command: string, args: string[], options?: SpawnOptions): ChildProcess;
  /** Runs `command` to its end inside the host; throws with its stderr on a non-zero exit. */
  run(command: string, args: string[]): string;
}

/** A simulated LAN: its hosts, a cable to pull, and one close() that removes it all. */
export interface Lan {
  hosts: LanHost[];
  /** Cuts `host` off the bridge (its link down) until {@link Lan.heal}. */
  cut(host: LanHost): void;
  heal(host: LanHost): void;
  close(): void;
}

/** True when this process may build namespaces (root, with unshare and nsenter). */
export function canSimulateLan(): boolean;
/** Builds a LAN of `count` hosts (10.77.0.1 … 10.77.0.<count>). */
export function startLan(count: number, subnet?: string): Lan;
