import type { WorkerHandler } from '../../src/worker/handlerApi.js';

/** A handler that answers `honest: <text>` only after `release()`: attacks run while its task waits. */
export function gatedHandler(): { handler: WorkerHandler; release: () => void } {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  return {
    release: () => release(),
    handler: {
      name: 'gated',
      description: 'answers once released',
      handle: async (ctx) => {
        await gate;
        return { text: `honest: ${ctx.text}` };
      },
    },
  };
}
