// A full garbage collection from inside a test, without starting the test process with
// --expose-gc: the flag can be set at run time, and `gc` is then reachable from a fresh context.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap in use (bytes) after two full collections: what is still referenced. */
export function heapUsedAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Two full collections, nothing measured. */
export function fullGc(): void {
  gc();
  gc();
}
