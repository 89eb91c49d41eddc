// The two forms in which nats-server logs a permission refusal (lines as nats-server 2.9 and 2.12
// write them), and lines that only look similar.
import { describe, expect, it } from 'vitest';
import { parseViolation } from '../../src/fabric/natsServer/violations.js';

describe('parseViolation', () => {
  it('reads a config user’s and an nkey user’s refusal', () => {
    expect(
      parseViolation(
        '[1] 2026/11/27 18:00:00.000000 [ERR] 127.0.0.1:5 - cid:9 - Publish Violation - User "amf-join", Subject "amf.task.final"',
      ),
    ).toEqual({ kind: 'publish', user: 'amf-join', subject: 'amf.task.final' });
    expect(
      parseViolation(
        '[1] [ERR] 127.0.0.1:5 - cid:9 - Subscription Violation - Nkey "UABC", Subject "amf.task.announce.beta"',
      ),
    ).toEqual({ kind: 'subscribe', user: 'UABC', subject: 'amf.task.announce.beta' });
  });

  it('reads a callout-issued user’s refusal, named by account and user name', () => {
    expect(
      parseViolation(
        '[27139] 2026/11/27 18:22:19.680482 [ERR] 127.0.0.1:37954 - cid:53 - "v3.3.0:nats.js:alpha-probe" - "$G/user:spiffe://local/worker/callout-alpha" - Publish Violation - Subject "$JS.API.CONSUMER.INFO.AMF_WORK.workers_beta"',
      ),
    ).toEqual({
      kind: 'publish',
      user: 'spiffe://local/worker/callout-alpha',
      subject: '$JS.API.CONSUMER.INFO.AMF_WORK.workers_beta',
    });
    expect(
      parseViolation(
        '[1] [ERR] 127.0.0.1:1 - cid:2 - "v3.3.0:nats.js:p" - "$G/user:spiffe://local/worker/a" - Subscription Violation - Subject "amf.task.announce.beta", SID 2',
      ),
    ).toEqual({ kind: 'subscribe', user: 'spiffe://local/worker/a', subject: 'amf.task.announce.beta' });
  });

  it('reads the 2.10+ form for config users and nkeys too', () => {
    expect(
      parseViolation(
        '[27890] 2026/11/27 18:25:36.120090 [ERR] 127.0.0.1:49792 - cid:5 - "v3.3.0:nats.js:probe" - "$G/nkey:UCIZJ722XP22HJQ7E64EALTAHTA2G4ZPFNAIHCBAEQN4IUSFTWDKSPH3" - Publish Violation - Subject "amf.forbidden.x"',
      ),
    ).toEqual({
      kind: 'publish',
      user: 'UCIZJ722XP22HJQ7E64EALTAHTA2G4ZPFNAIHCBAEQN4IUSFTWDKSPH3',
      subject: 'amf.forbidden.x',
    });
    expect(
      parseViolation(
        '[27890] 2026/11/27 18:25:36.123180 [ERR] 127.0.0.1:49802 - cid:6 - "v3.3.0:nats.js:jp" - "$G/user:amf-join" - Publish Violation - Subject "amf.forbidden.y"',
      ),
    ).toEqual({ kind: 'publish', user: 'amf-join', subject: 'amf.forbidden.y' });
  });

  it('ignores other lines, including an authorization error', () => {
    expect(parseViolation('[1] [ERR] 127.0.0.1:1 - cid:2 - authentication error - User "x"')).toBeUndefined();
    expect(parseViolation('Publish Violation without the fields')).toBeUndefined();
  });
});
