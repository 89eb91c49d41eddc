/**
 * What a plain A2A client (no AMF metadata) meets at the coordinator (issue 30): routing by skill,
 * by its conversation, by the default agent, or a refusal that lists the skills; input-required
 * tasks that wait `a2a.input_ttl_seconds` for a person, not the result timeout; security schemes in
 * the card whenever a key or an SVID is needed; raw text/plain and application/json parts; the
 * HTTP+JSON 415 body; SubscribeToTask that follows a task across its input requests.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentCard, SendMessageRequest, TaskState, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import {
  coordinatorAgentCard,
  OPERATOR_KEY_SCHEME,
  SVID_SCHEME,
  unionAgentCard,
  workerAgentCard,
} from '../../src/protocols/a2a/agentCards.js';
import { coordinatorPorts } from '../../src/apps/coordinatorApp.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { artifactText } from './a2aTestKit.js';

const weather: WorkerHandler = {
  name: 'weather',
  description: 'Weather forecasts: temperature, rain and wind for a city',
  handle: async (ctx) => `forecast for ${ctx.text}`,
};

/** Asks for input once; "silent" never answers at all. */
const asker: WorkerHandler = {
  name: 'asker',
  description: 'Questionnaires that ask the person for answers',
  handle: async (ctx) => {
    if (ctx.text === 'silent')
      return new Promise<string>((_resolve, reject) =>
        ctx.signal.addEventListener('abort', () => reject(new Error('aborted'))),
      );
    return `answer ${(await ctx.requestInput('your name?')).text}`;
  },
};

const VENV_A2A03 = fileURLToPath(new URL('../../.cache/python-venv-a2a03/bin/python', import.meta.url));
/** Reads a card file as the Python a2a-sdk 1.x client does (parse_agent_card, 0.3 fields mapped). */
const PY_V1 = `
import json, sys
from a2a.client.card_resolver import parse_agent_card
card = parse_agent_card(json.load(open(sys.argv[1])))
print(json.dumps({
  "url": [i.url for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"][0],
  "schemes": {k: v.http_auth_security_scheme.scheme for k, v in card.security_schemes.items()},
  "requirements": [sorted(r.schemes.keys()) for r in card.security_requirements],
}))`;
/** Reads a card file as the Python a2a-sdk 0.3 client does (its pydantic AgentCard). */
const PY_V03 = `
import json, sys
from a2a.types import AgentCard
card = AgentCard.model_validate(json.load(open(sys.argv[1])))
print(json.dumps({
  "url": card.url,
  "schemes": {k: v.root.scheme for k, v in card.security_schemes.items()},
  "requirements": [sorted(r.keys()) for r in card.security],
}))`;

function plain(text: string, more: { taskId?: string; contextId?: string } = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...more },
  });
}

function routedVia(task: Task): unknown {
  return (task.metadata as { amf?: { routedVia?: string; tag?: string } } | undefined)?.amf;
}

let mesh: TestMesh;
let client: Client;
let askerUrl: string;

beforeAll(async () => {
  // A short result timeout, and an input TTL longer than it: a person may take longer than a worker.
  mesh = await startTestMesh({
    config: { openai: { requestTimeoutSeconds: 1 }, a2a: { inputTtlSeconds: 3 } },
  });
  await mesh.startWorker('weather-1', ['weather'], weather);
  await mesh.startWorker('echo-1', ['echo'], echoHandler);
  askerUrl = (await mesh.startWorker('asker-1', ['asker'], asker)).url;
  client = await new ClientFactory().createFromUrl(mesh.url);
}, 60_000);

afterAll(async () => {
  await mesh?.close();
});

describe('routing of plain messages through the coordinator', () => {
  it('goes to the agent whose skill the words match, and the conversation stays with it', async () => {
    const first = (await client.sendMessage(plain('will it rain in Paris, what is the forecast'))) as Task;
    expect(first.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(routedVia(first)).toMatchObject({ tag: 'weather', routedVia: 'skill' });
    // "and Lyon?" has no words of its own to route by: its conversation went to weather.
    const next = (await client.sendMessage(plain('and Lyon?', { contextId: first.contextId }))) as Task;
    expect(next.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(routedVia(next)).toMatchObject({ tag: 'weather', routedVia: 'context' });
    expect(artifactText(next)).toBe('forecast for and Lyon?');
  });

  it('refuses a message nothing routes, listing the skills and the default-agent setting', async () => {
    const err = await client.sendMessage(plain('zzz qqq')).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/a2a\.default_agent/);
    expect(err?.message).toContain('weather (Weather forecasts: temperature, rain and wind for a city)');
    expect(err?.message).toMatch(/echo \(Echoes/);
  });

  it('goes to the default agent, named by its agent name', async () => {
    const other = await startTestMesh({ config: { a2a: { defaultAgent: 'echo-1' } } });
    try {
      await other.startWorker('weather-1', ['weather'], weather);
      await other.startWorker('echo-1', ['echo'], echoHandler);
      const c = await new ClientFactory().createFromUrl(other.url);
      const task = (await c.sendMessage(plain('zzz qqq'))) as Task;
      expect(routedVia(task)).toMatchObject({ tag: 'echo', routedVia: 'default-agent' });
      expect(artifactText(task)).toBe('zzz qqq');
    } finally {
      await other.close();
    }
  });
});

describe('input-required through the coordinator', () => {
  it('waits for the person past the result timeout, until the input TTL', async () => {
    const first = (await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: {
          messageId: randomUUID(),
          role: 'ROLE_USER',
          parts: [{ text: 'ask' }],
          metadata: { tag: 'asker' },
        },
      }),
    )) as Task;
    expect(first.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    // Past the 1 s result timeout the task still waits, and takes the answer.
    await new Promise((r) => setTimeout(r, 1500));
    const done = (await client.sendMessage(plain('Ada', { taskId: first.id }))) as Task;
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(done)).toBe('answer Ada');
  });

  it('fails a task nobody answers once the input TTL is over, and tells the worker', async () => {
    const first = (await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: {
          messageId: randomUUID(),
          role: 'ROLE_USER',
          parts: [{ text: 'ask' }],
          metadata: { tag: 'asker' },
        },
      }),
    )) as Task;
    expect(first.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const ended = await mesh.waitFor(
      async () => {
        const t = await client.getTask({ tenant: '', id: first.id });
        return t.status?.state === TaskState.TASK_STATE_FAILED ? t : undefined;
      },
      10_000,
      'the input TTL to end the task',
    );
    const reason = ended.status?.message?.parts[0]?.content;
    expect(reason?.$case === 'text' && reason.value).toMatch(
      /no reply .* within 3 s \(a2a\.input_ttl_seconds\)/,
    );
    const cancel = await mesh.waitForEvent(
      (e) => e.event.type === 'amf.task.cancel' && e.event.amftaskid === first.id,
    );
    expect(cancel.event.data.payload).toMatchObject({ reason: 'requester_timeout' });
  });

  it('still fails a silent worker at the result timeout', async () => {
    const task = (await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: {
          messageId: randomUUID(),
          role: 'ROLE_USER',
          parts: [{ text: 'silent' }],
          metadata: { tag: 'asker' },
        },
      }),
    )) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    const reason = task.status?.message?.parts[0]?.content;
    expect(reason?.$case === 'text' && reason.value).toBe('no result from the mesh within 1000 ms');
  });
});

describe.each([
  ['coordinator', () => mesh.url],
  ['worker', () => askerUrl],
])('SubscribeToTask on the %s', (_name, url) => {
  it('follows a task across its input request to its end', async () => {
    const c = await new ClientFactory().createFromUrl(url());
    const started = (await c.sendMessage(
      SendMessageRequest.fromJSON({
        message: {
          messageId: randomUUID(),
          role: 'ROLE_USER',
          parts: [{ text: 'ask' }],
          metadata: { tag: 'asker' },
        },
        configuration: { returnImmediately: true },
      }),
    )) as Task;
    const stream = c.resubscribeTask({ tenant: '', id: started.id });
    const states: TaskState[] = [];
    const kinds: string[] = [];
    let answered = false;
    for await (const event of stream as AsyncGenerator<StreamResponse>) {
      const payload = event.payload;
      if (!payload) continue;
      kinds.push(payload.$case);
      const state =
        payload.$case === 'task'
          ? payload.value.status?.state
          : payload.$case === 'statusUpdate'
            ? payload.value.status?.state
            : undefined;
      if (state !== undefined) states.push(state);
      if (state === TaskState.TASK_STATE_INPUT_REQUIRED && !answered) {
        answered = true;
        await c.sendMessage(plain('Grace', { taskId: started.id }));
      }
    }
    expect(kinds[0]).toBe('task');
    expect(states).toContain(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(await c.getTask({ tenant: '', id: started.id }))).toBe('answer Grace');
  });
});

describe('message parts a plain client sends', () => {
  it('takes a raw text/plain part as text and a raw application/json part as data', async () => {
    const text = (await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: {
          messageId: randomUUID(),
          role: 'ROLE_USER',
          parts: [{ raw: Buffer.from('hello raw').toString('base64'), mediaType: 'text/plain' }],
          metadata: { tag: 'echo' },
        },
      }),
    )) as Task;
    expect(text.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(text)).toBe('hello raw');
    const data = (await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: {
          messageId: randomUUID(),
          role: 'ROLE_USER',
          parts: [{ raw: Buffer.from('{"n":1}').toString('base64'), mediaType: 'application/json' }],
          metadata: { tag: 'echo' },
        },
      }),
    )) as Task;
    expect(artifactText(data)).toBe('{"n":1}');
  });

  it('HTTP+JSON answers an unsupported part with 415, and its body says 415', async () => {
    const res = await fetch(`${mesh.url}/a2a/rest/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({
        message: {
          messageId: randomUUID(),
          role: 'ROLE_USER',
          parts: [{ raw: 'AAAA', mediaType: 'image/png' }],
        },
      }),
    });
    expect(res.status).toBe(415);
    const body = (await res.json()) as { error: { code: number; details: Array<{ reason: string }> } };
    expect(body.error.code).toBe(415);
    expect(body.error.details[0]?.reason).toBe('CONTENT_TYPE_NOT_SUPPORTED');
  });
});

describe('security declared in the card', () => {
  it('declares nothing while the edge is bound to loopback', async () => {
    const card = coordinatorAgentCard(coordinatorPorts(mesh.coordinator).card, mesh.url);
    expect(card).not.toHaveProperty('securitySchemes');
    expect(card).not.toHaveProperty('securityRequirements');
  });

  it('declares the operator key as an HTTP bearer scheme beyond loopback, in 1.0 and 0.3 form', async () => {
    const card = coordinatorAgentCard(coordinatorPorts(mesh.coordinator).card, 'http://192.168.1.20:8765');
    expect(card.securitySchemes).toEqual({
      [OPERATOR_KEY_SCHEME]: {
        httpAuthSecurityScheme: { scheme: 'Bearer', description: expect.stringContaining('beyond loopback') },
      },
    });
    expect(card.securityRequirements).toEqual([{ schemes: { [OPERATOR_KEY_SCHEME]: { list: [] } } }]);
    // The SDK reads the scheme as a 1.0 HTTP bearer.
    const parsed = AgentCard.fromJSON(unionAgentCard(card));
    expect(parsed.securitySchemes[OPERATOR_KEY_SCHEME]?.scheme?.$case).toBe('httpAuthSecurityScheme');
    expect(parsed.securityRequirements).toHaveLength(1);
    // The union adds what 0.3 clients read: `security` and the flat scheme.
    const union = unionAgentCard(card);
    expect(union.security).toEqual([{ [OPERATOR_KEY_SCHEME]: [] }]);
    expect((union.securitySchemes as Record<string, unknown>)[OPERATOR_KEY_SCHEME]).toMatchObject({
      type: 'http',
      scheme: 'Bearer',
    });
  });

  it.each([
    ['1.x', process.env.AMF_TEST_PYTHON, PY_V1],
    ['0.3', process.env.AMF_TEST_PYTHON_A2A03 ?? (existsSync(VENV_A2A03) ? VENV_A2A03 : undefined), PY_V03],
  ])('Python a2a-sdk %s reads the union card and its security', async (_line, python, code) => {
    if (!python) return; // the interpreter is not installed here (scripts/provision.sh installs both)
    const dir = await mkdtemp(join(tmpdir(), 'amf-card-'));
    try {
      const file = join(dir, 'card.json');
      await writeFile(
        file,
        JSON.stringify(
          unionAgentCard(
            coordinatorAgentCard(coordinatorPorts(mesh.coordinator).card, 'http://10.1.2.3:8765'),
          ),
        ),
      );
      const out = await new Promise<string>((done, fail) =>
        execFile(python, ['-c', code, file], { timeout: 60_000 }, (err, stdout, stderr) =>
          err ? fail(new Error(`${err.message}\n${stderr}`)) : done(stdout),
        ),
      );
      expect(JSON.parse(out)).toEqual({
        url: 'http://10.1.2.3:8765/a2a',
        schemes: { [OPERATOR_KEY_SCHEME]: 'Bearer' },
        requirements: [[OPERATOR_KEY_SCHEME]],
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a worker under SPIFFE declares the operator key or a JWT-SVID, for every caller', () => {
    const card = workerAgentCard(
      {
        agentId: 'spiffe://example.org/w',
        agentRecord: () => ({ protocols_supported: ['A2A/1.0'] }),
      } as never,
      {
        name: 'w',
        tags: ['w'],
        trustDomain: 'example.org',
        handler: { description: 'w' },
        spiffe: true,
      },
      'http://127.0.0.1:9',
    );
    expect(Object.keys(card.securitySchemes as object).sort()).toEqual(
      [OPERATOR_KEY_SCHEME, SVID_SCHEME].sort(),
    );
    expect(card.securityRequirements).toEqual([
      { schemes: { [OPERATOR_KEY_SCHEME]: { list: [] } } },
      { schemes: { [SVID_SCHEME]: { list: [] } } },
    ]);
    expect(JSON.stringify(card.securitySchemes)).toContain('every caller');
  });
});
