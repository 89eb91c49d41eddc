/** Types of drill.mjs for its TypeScript callers (test/faults/quickDrill.test.ts). */
export interface DrillParams {
  requests: number;
  concurrency: number;
  sleepMs: number;
  faultAtMs: number;
  stopMs: number;
  natsShortMs: number;
  natsLongMs: number;
  partitionMs: number;
  timeoutMs: number;
  probeBoundMs: number;
  settleMs: number;
}

export interface DrillRow {
  id: number;
  name: string;
  /** False for a fault that was not run (`note` says why). */
  ran: boolean;
  note?: string;
  /** The drill itself failed (a process did not start, the fault overran its bound). */
  error?: string;
  seconds?: number;
  requests?: number;
  answered?: number;
  errors?: { reason: string; n: number }[];
  accepted?: number;
  lost?: number;
  double?: number;
  /** Answered otherwise than the task's record says, or with another task's answer. */
  wrong?: number;
  /** Tasks whose handler ran to the end more than once (counted by fault 12 only). */
  ranTwice?: number;
  lostSample?: { marker?: string; taskId: string; reason: string }[];
  wrongSample?: { marker?: string; taskId?: string; why: string }[];
  ranTwiceSample?: { marker?: string; taskId: string; runs: number }[];
  terminals?: Record<string, number>;
  recovered?: boolean;
  recoverySeconds?: number;
  recoveryFailure?: string;
  notes?: string[];
  extra?: Record<string, unknown>;
  logs?: string;
}

export interface DrillResult {
  rows: DrillRow[];
  params: DrillParams;
  lanes: number;
  mdns: boolean;
  root: string;
  seconds: number;
}

/** What a fault gets: the run's helpers. Only what TypeScript callers use is typed. */
export interface DrillContext {
  p: DrillParams;
  run: { logDir: string };
  spawnedMesh(options: {
    workers: number;
    demo?: boolean;
    port?: number;
    natsPort?: number;
    handler?: string;
  }): Promise<unknown>;
}

/** One fault of the drill (scripts/faults/faults.mjs). */
export interface DrillFault {
  id: number;
  name: string | ((p: DrillParams) => string);
  run(ctx: DrillContext): Promise<unknown>;
}

export const FULL: DrillParams;
export const QUICK: DrillParams;
export const BUDGET_MS: number;
export function rowFails(row: DrillRow): boolean;
export function runDrill(options?: {
  quick?: boolean;
  only?: number[];
  faults?: DrillFault[];
  lanes?: number;
  params?: Partial<DrillParams>;
  mdns?: boolean;
  keep?: boolean;
  log?: (line: string) => void;
}): Promise<DrillResult>;
