/** What a doctor check reports: its level, what it found and how to fix it. */

/** How bad a check's outcome is: `fail` makes the whole report not ok, `warn` does not. */
export type DoctorLevel = 'ok' | 'warn' | 'fail';

/** One check's outcome. `ok` is true only for level `ok`; `fix` says what to do, when there is something. */
export interface DoctorCheck {
  name: string;
  ok: boolean;
  level: DoctorLevel;
  detail: string;
  fix?: string;
}

/** The whole report: `ok` when no check failed (warnings allowed). */
export interface DoctorResult {
  ok: boolean;
  checks: DoctorCheck[];
}

/** A check that passed. */
export function pass(name: string, detail: string): DoctorCheck {
  return { name, ok: true, level: 'ok', detail };
}

/** A problem that does not stop `amf up`. */
export function warn(name: string, detail: string, fix?: string): DoctorCheck {
  return fix ? { name, ok: false, level: 'warn', detail, fix } : { name, ok: false, level: 'warn', detail };
}

/** A problem that stops `amf up`. */
export function fail(name: string, detail: string, fix?: string): DoctorCheck {
  return fix ? { name, ok: false, level: 'fail', detail, fix } : { name, ok: false, level: 'fail', detail };
}
