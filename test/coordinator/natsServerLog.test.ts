// The spawned nats-server's own log lines: errors and warnings reach the coordinator's log at their
// level (repeats counted, not repeated), and store troubles show in /health until they stop (a full store: 15 s after the last line; a corrupt block stays).
import { describe, expect, it } from 'vitest';
import { NatsServerLog } from '../../src/coordinator/natsServerLog.js';
import type { LogLevel } from '../../src/log.js';

function capture(): { lines: { level: LogLevel; message: string }[]; log: (l: LogLevel, m: string) => void } {
  const lines: { level: LogLevel; message: string }[] = [];
  return { lines, log: (level, message) => lines.push({ level, message }) };
}

describe('NatsServerLog', () => {
  it('logs ERR as error and WRN as warn, drops INF, and counts a repeated line instead of repeating it', () => {
    const { lines, log } = capture();
    const serverLog = new NatsServerLog(log, () => 1000);
    serverLog.line('[123] 2026/11/28 18:00:00.000000 [INF] Server is ready');
    // An agent dialling its own user before its grant lands: routine, not an error.
    serverLog.line(
      '[123] 2026/11/28 18:00:00.000000 [ERR] 127.0.0.1:1 - cid:5 - authentication error - Nkey "U…"',
    );
    serverLog.line('[123] 2026/11/28 18:00:00.000000 [WRN] Healthcheck failed');
    serverLog.line('[123] 2026/11/28 18:00:00.000000 [ERR] JetStream resource limits exceeded for account');
    serverLog.line('[123] 2026/11/28 18:00:00.000000 [ERR] JetStream resource limits exceeded for account');
    expect(lines.filter((l) => l.level !== 'debug')).toEqual([
      { level: 'warn', message: 'nats-server: Healthcheck failed' },
      { level: 'error', message: 'nats-server: JetStream resource limits exceeded for account' },
    ]);
  });

  it('a full store shows in the health until it is a minute old; a corrupt block stays', () => {
    let now = 0;
    const serverLog = new NatsServerLog(
      () => undefined,
      () => now,
    );
    expect(serverLog.storeHealth().state).toBe('ok');
    serverLog.line(
      '[1] 2026/11/28 18:00:00.000000 [ERR] Error writing msg: write /d/jetstream: no space left on device',
    );
    expect(serverLog.storeHealth().state).toBe('full');
    expect(serverLog.storeHealth().detail).toContain('no space left');
    now = 61_000;
    expect(serverLog.storeHealth().state).toBe('ok');
    serverLog.line(
      '[1] 2026/11/28 18:01:00.000000 [WRN] Filestore [AMF_EVENTS] detected corrupt block 3, lost data',
    );
    now = 10 * 60_000;
    expect(serverLog.storeHealth().state).toBe('corrupt');
  });
});
