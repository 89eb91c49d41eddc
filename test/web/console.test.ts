/**
 * The console in real Chromium against a real mesh (coordinator with its nats-server, real workers,
 * an operator key): every view is driven as a person would and checked for what it shows, and the key
 * reaches the page by the `#token=` hand-off or by pasting it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { HandlerError, type WorkerHandler } from '../../src/worker/handlerApi.js';
import { VERSION } from '../../src/version.js';
import { createEvent } from '../../src/events/cloudEvent.js';
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { openBrowser, type Browser } from './browser.js';

const KEY = 'console-test-key';
const WAIT = { timeout: 20_000 };
/** Visible controls of the view with no accessible name (no label, aria-label or text); run in the page. */
const UNNAMED_CONTROLS = `[...document.querySelectorAll('main :is(button, input, select, textarea, a)')]
  .filter((el) => el.offsetParent !== null)
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.textContent.trim())
  .map((el) => el.outerHTML.slice(0, 80))`;

const planner: WorkerHandler = {
  name: 'planner',
  description: 'plans, then has the echo agent say the plan',
  handle: async (ctx) => {
    ctx.progress('drafting the plan', 50);
    return `plan: ${await ctx.delegate('echo', `step one of ${ctx.text}`, { timeoutMs: 10_000 })}`;
  },
};

const broken: WorkerHandler = {
  name: 'broken',
  description: 'fails every task',
  handle: () => {
    throw new HandlerError('bad_input', 'the input is not a plan');
  },
};

/** Streams three chunks: each is an `amf.result.partial`, folded into one row in Events. */
const streamer: WorkerHandler = {
  name: 'streamer',
  description: 'answers in three streamed chunks',
  handle: async function* () {
    yield 'one ';
    yield 'two ';
    yield 'three';
  },
  // A resource and a prompt besides its tool: the Tools view lists them and uses them through /mcp.
  mcp: {
    resources: [
      {
        resource: {
          uri: 'notes://today',
          name: 'today',
          description: 'the notes of the day',
          mimeType: 'text/plain',
        },
        read: () =>
          Promise.resolve({
            contents: [{ uri: 'notes://today', mimeType: 'text/plain', text: 'ship the console' }],
          }),
      },
    ],
    prompts: [
      {
        prompt: {
          name: 'recap',
          description: 'asks for a recap of a topic',
          arguments: [{ name: 'topic', description: 'what to recap', required: true }],
        },
        get: (args) =>
          Promise.resolve({
            messages: [
              { role: 'user', content: { type: 'text', text: `Recap ${args.topic ?? ''} in three lines.` } },
            ],
          }),
      },
    ],
  },
};

/** Works until cancelled (its signal aborts), for the console's Cancel button. */
const sleeper: WorkerHandler = {
  name: 'sleeper',
  description: 'waits until the task is cancelled',
  handle: (ctx) =>
    new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('woke up'), 30_000);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve('stopped');
      });
    }),
};

async function chat(mesh: TestMesh, tag: string, text: string): Promise<number> {
  const res = await fetch(`${mesh.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: `amf/${tag}`, messages: [{ role: 'user', content: text }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

/** Text of the visible view's rows, one string per row (in Tasks, the task list's). */
async function rows(
  page: Page,
  view: string,
  panel = view === 'tasks' ? '#task-list' : '',
): Promise<string[]> {
  return page.locator(`#view-${view} ${panel} tbody tr`).allInnerTexts();
}

describe('the console (Chromium, real mesh)', { timeout: 60_000 }, () => {
  let mesh: TestMesh;
  let browser: Browser;
  let page: Page;
  let spare: RunningWorker;
  let foreign: RunningWorker | undefined;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { coordinator: { apiKey: KEY } } });
    await mesh.startWorker('echoer', ['echo'], echoHandler, { concurrency: 4 });
    await mesh.startWorker('planner', ['plan'], planner);
    await mesh.startWorker('breaker', ['broken'], broken);
    spare = await mesh.startWorker('spare', ['spare'], echoHandler);
    await mesh.startWorker('streamer', ['stream'], streamer);
    await mesh.startWorker('sleeper', ['slow'], sleeper);
    // An agent of another trust domain: policy denies it (foreign_trust_domain).
    foreign = await startWorker({
      name: 'stranger',
      tags: ['strange'],
      handler: echoHandler,
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      trustDomain: 'other.example',
      port: 0,
      heartbeatSeconds: 1,
    });
    await mesh.waitForEvent(
      (e) => e.subject === 'amf.policy.deny' && JSON.stringify(e.event.data).includes('foreign_trust_domain'),
      15_000,
      'the foreign agent denied',
    );
    // Tasks before the page opens: the console must replay them from JetStream.
    expect(await chat(mesh, 'echo', 'hello from history')).toBe(200);
    expect(await chat(mesh, 'plan', 'the launch')).toBe(200);
    expect(await chat(mesh, 'broken', 'anything')).not.toBe(200);
    // A model nobody serves: refused, and the refusal must be visible in the console.
    expect(await chat(mesh, 'nosuchtag', 'anyone there?')).toBe(404);
    expect(await chat(mesh, 'stream', 'count to three')).toBe(200);
    // An MCP call of a tool no agent serves: refused, and in the MCP audit.
    const mcp = new Client({ name: 'console-test', version: '1.0.0' });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${KEY}` } },
      }),
    );
    const call = await mcp.callTool({ name: 'nobody__nothing', arguments: {} }).catch((e: unknown) => e);
    expect(String(call instanceof Error ? call.message : JSON.stringify(call))).toContain('not found');
    await mcp.close();
    browser = await openBrowser();
    page = browser.page;
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await foreign?.close(1000);
    await mesh?.close();
  });

  it('shows the real version, and on a 401 asks for the operator key; the pasted key works', async () => {
    await page.goto(`${mesh.url}/#/tasks`);
    await expect.poll(() => page.locator('#version').innerText(), WAIT).toBe(`amf ${VERSION}`);
    expect(await page.content()).not.toContain('vaf-mcp');
    await page.locator('#live-text').filter({ hasText: 'operator key' }).waitFor(WAIT);
    const prompt = page.getByRole('alert').filter({ hasText: 'needs the operator key' });
    await prompt.waitFor(WAIT);
    expect(await prompt.innerText()).toContain('operator.key');
    // The prompt puts the cursor where the key goes.
    expect(await page.evaluate('document.activeElement.id')).toBe('api-key');
    await page.getByLabel('Operator key').fill(KEY);
    await page.getByRole('button', { name: 'Save' }).click();
    await page
      .locator('#live-text')
      .filter({ hasText: /^live$/ })
      .waitFor(WAIT);
    expect(await prompt.isVisible()).toBe(false);
  });

  it('takes the key from the #token= of the URL `amf up` prints, once, and removes it from the address bar', async () => {
    await page.evaluate('localStorage.clear()');
    await page.goto('about:blank');
    await page.goto(`${mesh.url}/#token=${encodeURIComponent(KEY)}`);
    await page
      .locator('#live-text')
      .filter({ hasText: /^live$/ })
      .waitFor(WAIT);
    expect(await page.evaluate('location.href')).toBe(`${mesh.url}/`);
    expect(await page.evaluate("localStorage.getItem('amf.apiKey')")).toBe(KEY);
    // Kept for the next visit without a token.
    await page.goto('about:blank');
    await page.goto(`${mesh.url}/#/tasks`);
    await page
      .locator('#live-text')
      .filter({ hasText: /^live$/ })
      .waitFor(WAIT);
  });

  it('Tasks: replays history, shows failures in red with their reason, filters, opens a task from a link', async () => {
    // The task list (GET /tasks) may come before the history: wait for the task's text.
    await page.locator('#view-tasks tbody tr', { hasText: 'hello from history' }).waitFor(WAIT);
    const all = await rows(page, 'tasks');
    expect(all.some((r) => r.includes('completed') && r.includes('hello from history'))).toBe(true);
    const failed = page.locator('#view-tasks tr.failed');
    await expect.poll(() => failed.count()).toBe(1);
    expect(await failed.innerText()).toMatch(/failed[\s\S]*broken[\s\S]*bad_input: the input is not a plan/);
    const color = (selector: string) =>
      page.evaluate(`getComputedStyle(document.querySelector(${JSON.stringify(selector)})).color`);
    expect(await color('#view-tasks tr.failed .reason')).not.toBe(
      await color('#view-tasks .badge.s-completed'),
    );

    await page.getByLabel('Filter by state').selectOption('failed');
    expect(await rows(page, 'tasks')).toHaveLength(1);
    await page.getByLabel('Filter by state').selectOption('');
    await page.getByLabel('Filter by tag').selectOption('plan');
    expect(await rows(page, 'tasks')).toHaveLength(1);
    await page.getByLabel('Filter by tag').selectOption('');
    await page.getByLabel('Filter by agent').selectOption('echoer');
    const byEcho = await rows(page, 'tasks');
    expect(byEcho.length).toBe(2); // the direct echo task and the planner's delegated one
    await page.getByLabel('Filter by agent').selectOption('');

    // A task opened from a link: the planner's task, with its progress and delegation tree.
    const planTask = mesh.events.find(
      (e) => e.event.type === 'amf.task.announce' && e.subject.endsWith('.plan'),
    );
    const planId = planTask!.event.amftaskid!;
    await page.goto(`${mesh.url}/#/tasks/${planId}`);
    const detail = page.getByRole('article', { name: `Task ${planId}` });
    await detail.waitFor(WAIT);
    const timeline = await detail.locator('ol.timeline li').allInnerTexts();
    expect(timeline.join('\n')).toMatch(
      /announced for plan[\s\S]*claimed by planner[\s\S]*progress 50%: drafting the plan/,
    );
    expect(timeline.join('\n')).toMatch(/delegated to echo[\s\S]*completed by planner/);
    // Timelines in milliseconds, each step with its offset from the first; the task's durations.
    expect(timeline[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} \+0 ms announced for plan/);
    expect(timeline.at(-1)).toMatch(/^\d\d:\d\d:\d\d\.\d{3} \+\d+(\.\d+)? m?s completed by planner/);
    for (const name of ['Queued for', 'Ran for', 'Total time'])
      expect(await detail.getByLabel(name).innerText()).toMatch(/^\d+(\.\d+)? m?s$/);
    // The list has the duration too, and a chart of rates and errors per tag.
    const planRow = page.locator('#task-list tbody tr', { hasText: 'the launch' });
    expect(await planRow.locator('td').nth(6).innerText()).toMatch(/^\d+(\.\d+)? m?s$/);
    expect(await planRow.locator('td').nth(6).getAttribute('title')).toMatch(/^queued \d.*, ran \d/);
    const rates = page.getByRole('table', { name: 'Rates per tag' });
    expect(await rates.locator('tbody tr', { hasText: 'broken' }).innerText()).toMatch(
      /broken\s+1\s+[\d.]+\/min\s+100% \(1\)/,
    );
    expect(await rates.locator('tbody tr', { hasText: 'plan' }).innerText()).toMatch(
      /plan\s+1\s+[\d.]+\/min\s+0% \(0\)/,
    );
    expect(
      await rates
        .getByRole('img', { name: /^broken: 1 tasks over .*, 1 failed$/ })
        .locator('rect.bar-bad')
        .count(),
    ).toBe(1);
    // Per agent: the agent that failed it, red.
    await page.getByLabel('Group rates by').selectOption('agent');
    const byAgent = page.getByRole('table', { name: 'Rates per agent' });
    expect(await byAgent.locator('tbody tr', { hasText: 'breaker' }).innerText()).toMatch(
      /breaker\s+1\s+[\d.]+\/min\s+100% \(1\)/,
    );
    await page.getByLabel('Group rates by').selectOption('tag');
    const tree = detail.getByRole('list', { name: 'Delegation tree' });
    expect(await tree.locator('li').count()).toBe(2);
    expect(await tree.innerText()).toMatch(/completed plan[\s\S]*completed echo/);
  });

  it('Tasks and Events: a task sent while the page is open appears live', async () => {
    await page.goto(`${mesh.url}/#/tasks`);
    await page.locator('#view-tasks tbody tr').nth(3).waitFor(WAIT);
    expect(await chat(mesh, 'echo', 'live one')).toBe(200);
    await page.locator('#view-tasks tbody tr', { hasText: 'live one' }).waitFor(WAIT);
  });

  it('Agents: admitted with risk score, denied with reasons, card and tools, forgetting an offline agent', async () => {
    await page.goto(`${mesh.url}/#/agents`);
    const echoer = page.locator('#view-agents tbody tr', { hasText: 'spiffe://local/worker/echoer' });
    await echoer.waitFor(WAIT);
    expect(await echoer.innerText()).toMatch(/live[\s\S]*echoer[\s\S]*echo[\s\S]*0\.00[\s\S]*local/);
    const denied = page.locator('#view-agents tbody tr.failed', { hasText: 'stranger' });
    await denied.waitFor(WAIT);
    expect(await denied.innerText()).toMatch(/denied[\s\S]*foreign_trust_domain/);

    await page.getByRole('link', { name: 'echoer', exact: true }).click();
    const card = page.getByRole('article', { name: 'Agent spiffe://local/worker/echoer' });
    await card.waitFor(WAIT);
    expect(await card.innerText()).toMatch(/Identity\s+spiffe:\/\/local\/worker\/echoer/);
    expect(await card.getByRole('link', { name: 'echoer__echo' }).count()).toBe(1);
    expect(await card.locator('pre.json').innerText()).toContain('"name": "echoer"');
    // A live agent may be forgotten too (an impostor thrown out), after a confirmation.
    expect(await card.getByRole('button', { name: 'Forget agent' }).count()).toBe(1);
    expect(await card.getByRole('button', { name: 'Approve agent' }).count()).toBe(0);

    await spare.close(1000);
    await mesh.waitFor(
      () => mesh.coordinator.registry.get('spiffe://local/worker/spare')?.status === 'offline',
    );
    await page.goto(`${mesh.url}/#/agents/${encodeURIComponent('spiffe://local/worker/spare')}`);
    const offline = page.getByRole('article', { name: 'Agent spiffe://local/worker/spare' });
    await offline.locator('.badge.s-offline').waitFor(WAIT);
    await offline.getByRole('button', { name: 'Forget agent' }).click();
    await page.getByRole('status').filter({ hasText: 'Forgot spiffe://local/worker/spare' }).waitFor(WAIT);
    await expect
      .poll(() => rows(page, 'agents').then((r) => r.some((x) => x.includes('worker/spare'))), WAIT)
      .toBe(false);
    expect(mesh.coordinator.registry.get('spiffe://local/worker/spare')).toBeUndefined();
  });

  it('Agents: a pending agent (heard on mDNS only) shows where it was heard and is approved from its card', async () => {
    const id = 'spiffe://local/worker/lan-echo';
    const key = createEphemeralAgentKey().publicKey;
    // What the mDNS door lists for a stranger's advertisement (its packets: test/security/mdnsNeverGivesPower.test.ts).
    mesh.coordinator.registry.listPending(
      {
        agent_id: id,
        endpoint: 'http://127.0.0.1:9',
        protocols_supported: ['A2A/1.0'],
        capability_tags: ['lan'],
        nkey: key,
      },
      { verified: true },
      { source: '127.0.0.1', instance: 'lan-echo' },
    );
    await page.goto(`${mesh.url}/#/agents/${encodeURIComponent(id)}`);
    const card = page.getByRole('article', { name: `Agent ${id}` });
    await card.locator('.badge.s-pending').waitFor(WAIT);
    expect(await card.innerText()).toContain('127.0.0.1 (lan-echo) on mDNS');
    expect(await card.innerText()).toContain(key);
    await card.getByRole('button', { name: 'Approve agent' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Approved ${id}` })
      .waitFor(WAIT);
    expect(mesh.coordinator.registry.boundKey(id)).toBe(key);
    expect(mesh.coordinator.registry.enrollment(key)).toMatchObject({ agent_id: id, via: 'approval' });
  });

  it('Agents: a live agent is disabled from its card (no new work, no model) and enabled again', async () => {
    const id = 'spiffe://local/worker/echoer';
    await page.goto(`${mesh.url}/#/agents/${encodeURIComponent(id)}`);
    const card = page.getByRole('article', { name: `Agent ${id}` });
    await card.locator('.badge.s-live').waitFor(WAIT);
    await card.getByRole('button', { name: 'Disable agent' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Disabled ${id}` })
      .waitFor(WAIT);
    expect(mesh.coordinator.registry.isDisabled(id)).toBe(true);
    await card.locator('.badge.s-disabled').waitFor(WAIT);
    expect(await card.innerText()).toMatch(
      /Disabled\s+by the operator from [^\n]+ at [\d:]+: it finishes what it holds/,
    );
    const row = page.locator('#view-agents tbody tr', { hasText: id });
    expect(await row.innerText()).toMatch(/disabled[\s\S]*disabled by the operator at/);
    // No route goes to it: the only echo agent disabled, amf/echo is no model now.
    const models = (await (await fetch(`${mesh.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).not.toContain('amf/echo');

    await card.getByRole('button', { name: 'Enable agent' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: `Enabled ${id}` })
      .waitFor(WAIT);
    await card.locator('.badge.s-live').waitFor(WAIT);
    expect(mesh.coordinator.registry.isDisabled(id)).toBe(false);
    expect(await chat(mesh, 'echo', 'back at work')).toBe(200);
  });

  it('Tools: the federated catalog and a playground form built from the input schema, called through /mcp', async () => {
    await page.goto(`${mesh.url}/#/tools/echoer__echo`);
    // The catalog is fetched after the page loads: wait for the row a person would look for.
    const row = page.locator('#view-tools tbody tr', { hasText: 'echoer__echo' });
    await row.first().waitFor(WAIT);
    expect(await row.first().innerText()).toContain('echoer');
    await page.getByLabel('text *').fill('through the playground');
    await page.getByRole('button', { name: 'Call echoer__echo' }).click();
    await expect.poll(() => page.getByLabel('Tool result').innerText(), WAIT).toBe('through the playground');
    // The resources and prompts /mcp federates: listed with their agent, read and fetched through /mcp.
    const resources = page.getByRole('region', { name: 'Resources' });
    const note = resources.locator('tbody tr', { hasText: 'the notes of the day' });
    await note.waitFor(WAIT);
    expect(await note.innerText()).toMatch(/notes:\/\/today[\s\S]*today[\s\S]*streamer/);
    await note.getByRole('button', { name: /^Read / }).click();
    await expect.poll(() => page.getByLabel('Resource content').innerText(), WAIT).toBe('ship the console');
    const prompts = page.getByRole('region', { name: 'Prompts' });
    const recap = prompts.locator('tbody tr', { hasText: 'recap' });
    expect(await recap.innerText()).toMatch(
      /recap[\s\S]*streamer[\s\S]*asks for a recap of a topic[\s\S]*topic \*/,
    );
    await recap.getByRole('button', { name: /^Use prompt / }).click();
    await page.getByLabel('topic *').fill('the launch');
    await page.getByRole('button', { name: /^Get .*recap$/ }).click();
    await expect
      .poll(() => page.getByRole('list', { name: 'Prompt messages' }).innerText(), WAIT)
      .toBe('user: Recap the launch in three lines.');
  });

  it('Policy and audit: admission decisions and MCP calls, searchable', async () => {
    // A warning of per-agent identity: readable words, red like a deny.
    mesh.coordinator.notices.warn({
      reason: 'forged_event',
      message: 'signed by key UFAKE, not by spiffe://local/worker/echoer',
      agent_id: 'spiffe://local/worker/echoer',
    });
    await page.goto(`${mesh.url}/#/policy`);
    const notices = page.getByRole('region', { name: 'Policy notices' });
    const refusal = notices.locator('tbody tr', { hasText: 'no_agent_for_tag' });
    await refusal.waitFor(WAIT);
    expect(await refusal.innerText()).toMatch(/openai request for amf\/nosuchtag refused/);
    const forged = notices.locator('tbody tr.failed', { hasText: 'forged_event' });
    await forged.waitFor(WAIT);
    expect(await forged.innerText()).toMatch(/forged event[\s\S]*signed by key UFAKE/);
    const unknownTool = page
      .getByRole('region', { name: 'MCP calls' })
      .locator('tbody tr.failed', { hasText: 'nobody__nothing' });
    await unknownTool.waitFor(WAIT);
    expect(await unknownTool.innerText()).toMatch(/deny[\s\S]*denied[\s\S]*unknown_tool/);
    const mcpRow = page
      .getByRole('region', { name: 'MCP calls' })
      .locator('tbody tr', { hasText: 'echoer/echo' });
    await mcpRow.waitFor(WAIT);
    expect(await mcpRow.innerText()).toMatch(/allow[\s\S]*ok/);
    const admissions = page.getByRole('region', { name: 'Admission decisions' });
    // Agents admitted alike are one line with their count and names, unfolded on demand.
    const group = admissions.locator('tbody tr.grouped', { hasText: 'agents admitted' });
    await group.waitFor(WAIT);
    expect(await group.innerText()).toMatch(/×\d+\s+\d+ agents admitted[\s\S]*planner/);
    await group.getByRole('button', { name: /^Show \d+$/ }).click();
    const admitted = admissions.locator('tbody tr:not(.grouped)', { hasText: 'planner' });
    expect(await admitted.innerText()).toMatch(/admitted[\s\S]*0\.00/);
    await admissions.getByRole('button', { name: 'Fold' }).click();
    expect(await admitted.count()).toBe(0);
    // A warning a default setup repeats (one per MCP call over plain http) is one line with a count.
    for (let i = 0; i < 4; i++)
      mesh.coordinator.notices.warn({
        reason: 'mcp_call_unauthenticated',
        message: `MCP call spiffe://local/worker/echoer/echo ${i} forwarded over plaintext http:// without authentication`,
        agent_id: 'spiffe://local/worker/echoer',
      });
    const plain = notices.locator('tbody tr.grouped', { hasText: 'MCP calls forwarded over plain http' });
    await expect
      .poll(() => plain.innerText().catch(() => ''), WAIT)
      .toMatch(/×\d+\s+\d+ MCP calls forwarded over plain http/);
    expect(
      await notices.locator('tbody tr:not(.grouped)', { hasText: 'mcp_call_unauthenticated' }).count(),
    ).toBe(0);
    // Without SPIFFE every admitted agent's watcher summary is unsigned: one line for all of them.
    const unsigned = notices.locator('tbody tr.grouped', { hasText: 'admitted without SPIFFE' });
    expect(await unsigned.innerText()).toMatch(
      /×\d+\s+\d+ agents admitted without SPIFFE[\s\S]*echoer[\s\S]*Show \d+/,
    );
    await page.getByLabel('Search decisions').fill('foreign_trust');
    await expect.poll(() => page.locator('#view-policy tbody tr', { hasText: 'echoer' }).count()).toBe(0);
    expect(await admissions.locator('tbody tr').allInnerTexts()).toEqual([
      expect.stringMatching(/denied[\s\S]*stranger[\s\S]*foreign_trust_domain/),
    ]);
  });

  it('Chat: multi-turn and streamed with an amf/<tag> model', async () => {
    await page.goto(`${mesh.url}/#/chat`);
    await expect
      .poll(() => page.getByLabel('Model').locator('option').allInnerTexts(), WAIT)
      .toContain('amf/echo');
    await page.getByLabel('Model').selectOption('amf/echo');
    const box = page.getByRole('textbox', { name: 'Message' });
    await box.fill('first turn');
    await box.press('Enter');
    await page.locator('.msg.assistant', { hasText: 'first turn' }).waitFor(WAIT);
    await box.fill('second turn');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.msg.assistant', { hasText: 'second turn' }).waitFor(WAIT);
    expect(await page.locator('.msg').allInnerTexts()).toEqual([
      'first turn',
      'first turn',
      'second turn',
      'second turn',
    ]);
    // The second request carried the whole conversation (the echo worker saw three messages).
    const announce = mesh.events.filter((e) => e.event.type === 'amf.task.announce').at(-1)!;
    expect((announce.event.data.payload as { messages: unknown[] }).messages).toHaveLength(3);
  });

  it('Events: history then live, heartbeats hidden unless asked, a row opens the CloudEvent by keyboard', async () => {
    // A follow-up message of a multi-turn task has its own label and colour.
    mesh.coordinator.bus.publish(
      createEvent({
        type: 'amf.task.input',
        sender: mesh.coordinator.sender,
        taskId: randomUUID(),
        payload: {
          task_id: randomUUID(),
          agent_id: 'spiffe://local/worker/echoer',
          text: 'and in blue please',
        },
      }),
    );
    await page.goto(`${mesh.url}/#/events`);
    const input = page.locator('#view-events tr.ev-row', { hasText: 'and in blue please' });
    await input.waitFor(WAIT);
    expect(await input.innerText()).toMatch(/task\.input[\s\S]*follow-up for echoer: and in blue please/);
    expect(await input.locator('.badge.s-input').count()).toBe(1);
    const refused = page.locator('#view-events tr.ev-row', { hasText: 'amf/nosuchtag' });
    expect(await refused.innerText()).toMatch(
      /policy\.warning[\s\S]*no agent for tag: openai request for amf\/nosuchtag/,
    );
    // A streamed answer's chunks are one row with their count and text, not one row each.
    const streamedTask = mesh.events.find(
      (e) => e.event.type === 'amf.task.announce' && e.subject.endsWith('.stream'),
    )!.event.amftaskid!;
    const chunks = page.locator('#view-events tr.ev-row', { hasText: 'result.partial' }).filter({
      has: page.getByRole('link', { name: streamedTask.slice(0, 8), exact: true }),
    });
    expect(await chunks.count()).toBe(1);
    expect(await chunks.innerText()).toMatch(/result\.partial\s+×3[\s\S]*3 streamed chunks: one two three/);
    const row = page.locator('#view-events tr.ev-row', { hasText: 'hello from history' }).first();
    await row.waitFor(WAIT);
    expect(
      await page.locator('#view-events tr.ev-row', { hasText: 'discovery.agent.heartbeat' }).count(),
    ).toBe(0);
    await page.getByLabel('show heartbeats').check();
    await page
      .locator('#view-events tr.ev-row', { hasText: 'discovery.agent.heartbeat' })
      .first()
      .waitFor(WAIT);
    await page.getByLabel('show heartbeats').uncheck();
    const failedFinal = page.locator('#view-events tr.ev-row.failed', { hasText: 'bad_input' });
    expect(await failedFinal.count()).toBeGreaterThan(0);
    await row.focus();
    await page.keyboard.press('Enter');
    await page.locator('#view-events pre.json', { hasText: '"specversion": "1.0"' }).waitFor(WAIT);
  });

  it('is keyboard usable with accessible names, and fits a phone screen', async () => {
    await page.goto('about:blank');
    await page.goto(`${mesh.url}/#/tasks`);
    await page.locator('#view-tasks tbody tr').first().waitFor(WAIT);
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Skip to content');
    await page.getByRole('link', { name: 'Agents' }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate('location.hash')).toBe('#/agents');
    // The hash changes first; the view's router marks the link on the hashchange that follows.
    await expect
      .poll(() => page.getByRole('link', { name: 'Agents' }).getAttribute('aria-current'))
      .toBe('page');
    for (const view of ['tasks', 'agents', 'policy', 'tools', 'chat', 'events']) {
      await page.goto(`${mesh.url}/#/${view}`);
      await page.locator(`#view-${view} h2`).waitFor(WAIT);
      const unnamed = await page.evaluate(UNNAMED_CONTROLS);
      expect(unnamed, view).toEqual([]);
    }
    await page.setViewportSize({ width: 390, height: 800 });
    await page.goto(`${mesh.url}/#/tasks`);
    await page.locator('#view-tasks tbody tr').first().waitFor(WAIT);
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    // The result column is on the screen, not scrolled off to the right of the panel.
    const resultHeader = await page.getByRole('columnheader', { name: 'Result or reason' }).boundingBox();
    expect(resultHeader!.x + resultHeader!.width).toBeLessThanOrEqual(390);
    const firstResult = await page.locator('#task-list tbody tr td.result').first().boundingBox();
    expect(firstResult!.x + firstResult!.width).toBeLessThanOrEqual(390);
    await page.setViewportSize({ width: 1280, height: 800 });
    expect(browser.errors.filter((e) => !/Failed to load resource/.test(e))).toEqual([]);
  });

  it('Tasks: a task older than the loaded history is listed from GET /tasks and opened by its id', async () => {
    const failedTask = mesh.events.find(
      (e) => e.event.type === 'amf.task.announce' && e.subject.endsWith('.broken'),
    )!.event.amftaskid!;
    // 1,000 newer events push the task's own events out of the window the page replays (warnings:
    // artifacts are kept in a stream of their own, outside the history).
    for (let i = 0; i < 1000; i++)
      mesh.coordinator.bus.publish(
        createEvent({
          type: 'amf.policy.warning',
          sender: mesh.coordinator.sender,
          payload: { reason: 'history_filler', message: `filler ${i}` },
        }),
      );
    const window = async () => {
      const res = await fetch(`${mesh.url}/events/history?limit=1000`, {
        headers: { authorization: `Bearer ${KEY}` },
      });
      return ((await res.json()) as { events: Array<{ event: { amftaskid?: string } }> }).events;
    };
    await expect
      .poll(async () => (await window()).some((e) => e.event.amftaskid === failedTask), WAIT)
      .toBe(false);

    await page.goto('about:blank');
    await page.goto(`${mesh.url}/#/tasks`);
    const listed = page.locator('#view-tasks tbody tr.failed', { hasText: 'broken' });
    await listed.waitFor(WAIT);
    expect(await listed.innerText()).toMatch(/failed[\s\S]*broken[\s\S]*breaker/);
    await listed.getByRole('link', { name: `task ${failedTask}` }).click();
    const detail = page.getByRole('article', { name: `Task ${failedTask}` });
    await detail.waitFor(WAIT);
    await detail.locator('ol.timeline li.bad').waitFor(WAIT);
    expect((await detail.locator('ol.timeline li').allInnerTexts()).join('\n')).toMatch(
      /announced for broken[\s\S]*claimed by breaker[\s\S]*failed — bad_input: the input is not a plan/,
    );
  });

  it('Tasks: a running task is cancelled, and a failed one retried as a new task, each after a confirmation', async () => {
    const waiting = chat(mesh, 'slow', 'wait for me');
    await page.goto('about:blank');
    await page.goto(`${mesh.url}/#/tasks`);
    const running = page.locator('#task-list tbody tr', { hasText: 'wait for me' });
    await running.locator('.badge:is(.s-claimed, .s-running)').waitFor(WAIT);
    await running.getByRole('link').click();
    const detail = page.getByRole('article', { name: /^Task / });
    await detail.waitFor(WAIT);
    const dialogs: string[] = [];
    page.once('dialog', (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
    await detail.getByRole('button', { name: 'Cancel task' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /^Cancelled task / })
      .waitFor(WAIT);
    expect(dialogs[0]).toMatch(/^Cancel task .*\?/);
    expect(await waiting).not.toBe(200);
    await detail.locator('.badge.s-failed').first().waitFor(WAIT);
    await detail.locator('ol.timeline li.bad', { hasText: 'task_cancelled' }).first().waitFor(WAIT);
    expect(await detail.getByRole('button', { name: 'Cancel task' }).count()).toBe(0);

    // The failed task of the broken agent, sent again: a new task with the same text and tag.
    await page.goto(`${mesh.url}/#/tasks`);
    const failed = page.locator('#task-list tbody tr.failed', { hasText: 'bad_input' }).first();
    await failed.waitFor(WAIT);
    await failed.getByRole('link').click();
    const broken = page.getByRole('article', { name: /^Task / });
    await broken.getByRole('button', { name: 'Retry as a new task' }).waitFor(WAIT);
    page.once('dialog', (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
    await broken.getByRole('button', { name: 'Retry as a new task' }).click();
    const retried = page.getByRole('status').filter({ hasText: /^Retried task / });
    await retried.waitFor(WAIT);
    expect(dialogs[1]).toMatch(/^Send the text of task .* to broken again, as a new task\?$/);
    await retried.getByRole('link').click();
    const again = page.getByRole('article', { name: /^Task / });
    await again.locator('ol.timeline li.bad', { hasText: 'bad_input' }).waitFor(WAIT);
    expect((await again.locator('ol.timeline li').allInnerTexts()).join('\n')).toMatch(
      /announced for broken[\s\S]*claimed by breaker/,
    );
    expect(await again.getByLabel('Total time').innerText()).toMatch(/\d/);
  });
});
