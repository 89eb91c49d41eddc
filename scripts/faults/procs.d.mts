/** Types of the part of procs.mjs that TypeScript callers use. */
export function inPrivateNetns(): Promise<boolean>;
export function killAllGroups(): void;
export function processesMentioning(text: string): Promise<{ pid: number; cmdline: string }[]>;
