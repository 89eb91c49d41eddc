// The console's shell: header (version, health, live state, API key), hash routes
// (#/tasks, #/tasks/<id>, #/agents/<id>, ...), and one event store fed by the JetStream history and
// then the live stream, shared by every view.
import { getJson, openLiveEvents, apiKey, setApiKey, takeKeyFromUrl, UNAUTHORIZED_EVENT } from './api.js';
import { byId, messageOf } from './dom.js';
import { tasksView } from './tasks.js';
import { agentsView } from './agents.js';
import { policyView } from './policy.js';
import { toolsView } from './tools.js';
import { chatView } from './chat.js';
import { eventsView } from './events.js';

const MAX_EVENTS = 5000;
const HISTORY_LIMIT = 1000;

/** Every event seen (history + live), oldest first, without duplicates; listeners hear new ones. */
class EventStore {
  constructor() {
    this.events = [];
    this.ids = new Set();
    this.listeners = new Set();
    this.historyState = 'loading';
  }

  add(event, notify = true) {
    if (!event || typeof event !== 'object' || this.ids.has(event.id)) return;
    this.ids.add(event.id);
    this.events.push(event);
    if (this.events.length > MAX_EVENTS) this.ids.delete(this.events.shift().id);
    if (notify) for (const l of this.listeners) l(event);
  }

  /** History arrives after the live stream opened: merge in time order, then tell everyone. */
  addHistory(events) {
    for (const e of events) this.add(e, false);
    this.events.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
    for (const l of this.listeners) l(null);
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

const store = new EventStore();
const views = [tasksView, agentsView, policyView, toolsView, chatView, eventsView];
const mounted = new Set();
let current;
let stopLive;

function setDot(dot, text, state, label) {
  dot.className = `dot ${state}`;
  text.textContent = label;
}

async function refreshHealth() {
  const dot = byId('health-dot');
  const text = byId('health-text');
  try {
    const res = await fetch('/health');
    const body = await res.json();
    byId('version').textContent = `amf ${body.amf_version ?? '?'}`;
    const agents = body.agents ? `${body.agents.live} live agent${body.agents.live === 1 ? '' : 's'}` : '';
    const tasks = body.tasks ? `, ${body.tasks.active} active task${body.tasks.active === 1 ? '' : 's'}` : '';
    setDot(dot, text, body.status === 'ok' ? 'ok' : 'warn', `${body.status}: ${agents}${tasks}`);
  } catch {
    setDot(dot, text, 'bad', 'coordinator unreachable');
  }
}

async function loadHistory() {
  try {
    const page = await getJson(`/events/history?limit=${HISTORY_LIMIT}`);
    store.historyState = page.truncated ? 'partial' : 'complete';
    store.addHistory(page.events.map((e) => e.event));
  } catch (err) {
    store.historyState = `unavailable: ${messageOf(err)}`;
    store.addHistory([]);
  }
}

function startLive() {
  stopLive?.();
  const dot = byId('live-dot');
  const text = byId('live-text');
  stopLive = openLiveEvents(
    (event) => store.add(event),
    (state, label) => setDot(dot, text, state, label),
  );
}

/** #/tasks/abc → { name: 'tasks', param: 'abc' } */
function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  const name = views.some((v) => v.name === parts[0]) ? parts[0] : 'tasks';
  const param = parts.length > 1 ? decodeURIComponent(parts.slice(1).join('/')) : undefined;
  return { name, param };
}

function route() {
  const { name, param } = parseRoute();
  for (const v of views) {
    const section = byId(`view-${v.name}`);
    if (v.name === name && !mounted.has(v.name)) {
      v.mount(section, { store });
      mounted.add(v.name);
    }
    section.hidden = v.name !== name;
  }
  for (const a of /** @type {NodeListOf<HTMLAnchorElement>} */ (document.querySelectorAll('nav a')))
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  const view = views.find((v) => v.name === name);
  if (!view) return; // parseRoute only names views that exist
  if (current !== view) current?.hide?.();
  current = view;
  view.show(param);
  document.title = `${view.title} · AMF console`;
}

/**
 * The operator key: taken from the `#token=` of the URL `amf up` printed, else stored from an earlier
 * visit, else pasted. Any 401 opens the prompt beside the key field and focuses it.
 */
function setupKey() {
  takeKeyFromUrl();
  const input = /** @type {HTMLInputElement} */ (byId('api-key'));
  const prompt = byId('key-prompt');
  input.value = apiKey();
  window.addEventListener(UNAUTHORIZED_EVENT, () => {
    if (!prompt.hidden) return;
    prompt.hidden = false;
    input.focus();
  });
  byId('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    setApiKey(input.value.trim());
    prompt.hidden = true;
    startLive();
    void loadHistory();
    route();
  });
}

setupKey();
window.addEventListener('hashchange', route);
void refreshHealth();
setInterval(refreshHealth, 5000);
startLive();
void loadHistory();
route();
