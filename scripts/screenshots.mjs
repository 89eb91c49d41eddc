// Takes the console screenshots of docs/images/ (1280x800) from a real mesh: `amf up --demo` on a
// free port with a fresh data dir, a few tasks and a tool call, then each view in headless Chromium.
// Run by hand after `npm run build` (not in CI): node scripts/screenshots.mjs [--out docs/images]
// It needs Debian's chromium (apt-get install chromium) and must run where mDNS cannot leak, e.g.
//   unshare -n bash -c 'ip link set lo up; node scripts/screenshots.mjs'
import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const out = process.argv.includes('--out') ? process.argv[process.argv.indexOf('--out') + 1] : 'docs/images';
const port = 18000 + Math.floor(Math.random() * 2000);
const base = `http://127.0.0.1:${port}`;
const dataDir = await mkdtemp(join(tmpdir(), 'amf-shots-'));
const mesh = spawn(
  process.execPath,
  [
    'bin/amf.js',
    'up',
    '--demo',
    '--no-mdns',
    '--port',
    String(port),
    '--nats-port',
    '0',
    '--data-dir',
    dataDir,
  ],
  {
    stdio: ['ignore', 'ignore', 'inherit'],
  },
);

async function waitFor(check, what, ms = 30000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      if (await check()) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function chat(tag, text) {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: `amf/${tag}`, messages: [{ role: 'user', content: text }] }),
  });
  return res.status;
}

let browser;
try {
  await waitFor(
    async () => (await (await fetch(`${base}/health`)).json()).agents.live >= 2,
    'the demo workers',
  );
  await chat('echo', 'hello mesh');
  await chat('calc', '2 * (3 + 4) ^ 2');
  await chat('calc', 'sqrt(');
  await chat('echo', 'summarize the week');
  await mkdir(out, { recursive: true });
  // A fresh profile (--user-data-dir, which Playwright sets from the first argument) every run.
  browser = await chromium.launchPersistentContext(join(dataDir, 'chromium'), {
    executablePath: process.env.AMF_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const page = browser.pages()[0] ?? (await browser.newPage());
  // The hand-off `amf up` prints: the operator key in the URL fragment, stored by the page once.
  const key = (await readFile(join(dataDir, 'operator.key'), 'utf8')).trim();
  await page.goto(`${base}/#token=${encodeURIComponent(key)}`);
  await page.locator('#live-text', { hasText: /^live$/ }).waitFor();
  const shoot = async (hash, name, ready) => {
    await page.goto(`${base}/${hash}`);
    await page.locator(ready).first().waitFor();
    await page.waitForTimeout(400);
    await page.screenshot({ path: join(out, `console-${name}.png`) });
    console.log(`${out}/console-${name}.png`);
  };
  await shoot('#/tasks', 'tasks', 'td .badge.s-completed');
  // The rates and error rates per tag, under the task list.
  const rates = page.getByRole('region', { name: 'Rates and errors' });
  await rates.locator('svg.rate-chart').first().waitFor();
  await rates.screenshot({ path: join(out, 'console-rates.png') });
  console.log(`${out}/console-rates.png`);
  const failed = page.locator('tr.failed a').first();
  const id = await failed.getAttribute('href');
  await shoot(id ?? '#/tasks', 'task', 'ol.timeline li');
  await shoot(
    '#/agents/' + encodeURIComponent('spiffe://local/worker/demo-calc'),
    'agents',
    '#view-agents article pre.json',
  );
  // An agent disabled from its card (still connected, no new work), then enabled again for the chat.
  const echoId = 'spiffe://local/worker/demo-echo';
  await page.goto(`${base}/#/agents/${encodeURIComponent(echoId)}`);
  const echoCard = page.getByRole('article', { name: `Agent ${echoId}` });
  await echoCard.getByRole('button', { name: 'Disable agent' }).click();
  await echoCard.locator('.badge.s-disabled').waitFor();
  await page.waitForTimeout(400);
  await page.screenshot({ path: join(out, 'console-agent-disabled.png') });
  console.log(`${out}/console-agent-disabled.png`);
  await echoCard.getByRole('button', { name: 'Enable agent' }).click();
  await echoCard.locator('.badge.s-live').waitFor();
  await shoot('#/tools/demo-calc__calc', 'tools', '#view-tools form button.primary');
  await page.getByLabel('text').fill('6 * 7');
  await page.getByRole('button', { name: 'Call demo-calc__calc' }).click();
  await page.getByLabel('Tool result').waitFor();
  await page.screenshot({ path: join(out, 'console-tools.png') });
  // Admissions alike fold into one row: wait for any admission row, folded or not.
  await shoot('#/policy', 'policy', '#view-policy [aria-labelledby="h-admissions"] tbody tr');
  await page.goto(`${base}/#/chat`);
  await page.getByLabel('Model').selectOption('amf/echo');
  await page.getByRole('textbox', { name: 'Message' }).fill('hello from the console');
  await page.getByRole('textbox', { name: 'Message' }).press('Enter');
  await page.locator('.msg.assistant').filter({ hasText: 'hello from the console' }).waitFor();
  await page.screenshot({ path: join(out, 'console-chat.png') });
  console.log(`${out}/console-chat.png`);
  await shoot('#/events', 'events', '#view-events td .badge.s-completed');
  await page.setViewportSize({ width: 390, height: 800 });
  await shoot('#/tasks', 'phone', 'td .badge.s-completed');
} finally {
  await browser?.close();
  mesh.kill('SIGTERM');
  await new Promise((r) => mesh.once('exit', r));
  await rm(dataDir, { recursive: true, force: true });
}
