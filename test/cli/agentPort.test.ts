// Where an agent listens: a free port as asked; a taken port the user chose fails naming its holder
// and the fix; a taken default gives way to any free port, with a note saying so.
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseAgentPort, explainListenFailure } from '../../src/cli/agentPort.js';
import { AmfError } from '../../src/errors.js';

describe('chooseAgentPort', () => {
  let holder: Server;
  let taken: number;

  beforeAll(async () => {
    // Reads what probes send, so their hang-ups end its sockets and close() does not wait.
    holder = createServer((socket) => socket.on('error', () => undefined).resume());
    await new Promise<void>((resolve) => holder.listen({ host: '127.0.0.1', port: 0 }, resolve));
    taken = (holder.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => holder.close(() => resolve())));

  it('keeps a free port and port 0 as they are', async () => {
    const free = createServer();
    await new Promise<void>((resolve) => free.listen({ host: '127.0.0.1', port: 0 }, resolve));
    const port = (free.address() as AddressInfo).port;
    await new Promise<void>((resolve) => free.close(() => resolve()));
    expect(await chooseAgentPort({ host: '127.0.0.1', port, chosen: true })).toEqual({ port });
    expect(await chooseAgentPort({ host: '127.0.0.1', port: 0, chosen: true })).toEqual({ port: 0 });
  });

  it('refuses a chosen port that is taken, naming its holder and --port 0', async () => {
    const err = await chooseAgentPort({ host: '127.0.0.1', port: taken, chosen: true }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AmfError);
    expect((err as AmfError).code).toBe('UNAVAILABLE');
    expect((err as AmfError).message).toMatch(
      new RegExp(`^port ${taken} on 127\\.0\\.0\\.1 is already in use by .+: stop it, or pass --port 0`),
    );
    // This process holds it: /proc names it.
    expect((err as AmfError).message).toContain(`pid ${process.pid}`);
  });

  it('gives way to any free port when the default nobody chose is taken, and says so', async () => {
    const choice = await chooseAgentPort({ host: '127.0.0.1', port: taken, chosen: false });
    expect(choice.port).toBe(0);
    expect(choice.note).toMatch(
      new RegExp(`^port ${taken} is in use by .+: listening on any free port instead`),
    );
  });

  it('explains a listen that lost the race for the port the same way', async () => {
    const raced = Object.assign(new Error('listen EADDRINUSE'), { code: 'EADDRINUSE' });
    const err = await explainListenFailure(raced, '127.0.0.1', taken);
    expect((err as AmfError).message).toContain('--port 0');
    const other = new Error('listen EACCES');
    expect(await explainListenFailure(other, '127.0.0.1', taken)).toBe(other);
  });
});
