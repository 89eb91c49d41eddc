/** A free port on 127.0.0.1 below the kernel's ephemeral range (see freePort.mjs). */
export function freePort(): Promise<number>;
