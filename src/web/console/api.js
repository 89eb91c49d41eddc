// The coordinator's HTTP API as the console uses it: JSON calls with the operator key (kept in this
// origin's localStorage, so a new tab needs no second hand-off), SSE read through fetch (so the key
// goes in a header, not the URL), and a minimal MCP client for the federated /mcp endpoint.

const KEY_STORE = 'amf.apiKey';
/** Dispatched on window when the coordinator answers 401: the key is missing or wrong. */
export const UNAUTHORIZED_EVENT = 'amf:unauthorized';

let memoryKey = '';

export function apiKey() {
  try {
    return localStorage.getItem(KEY_STORE) || memoryKey;
  } catch {
    return memoryKey;
  }
}

export function setApiKey(value) {
  memoryKey = value;
  try {
    if (value) localStorage.setItem(KEY_STORE, value);
    else localStorage.removeItem(KEY_STORE);
  } catch {
    /* storage disabled: the key lasts until reload */
  }
}

/**
 * Takes the key `amf up` put in the URL it printed (`/#token=KEY`), once: stores it and removes it
 * from the address bar and the history, so it is neither bookmarked nor shown. The fragment never
 * reached the server. True when a key was taken.
 */
export function takeKeyFromUrl() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const token = params.get('token');
  if (!token) return false;
  setApiKey(token);
  history.replaceState(null, '', `${location.pathname}${location.search}`);
  return true;
}

/**
 * fetch with the operator key. A 401 for the key still in use tells the page to ask for the key; one
 * for a key replaced meanwhile (a request from before Save) does not.
 */
export async function call(path, init = {}) {
  const key = apiKey();
  const headers = key ? { ...init.headers, authorization: `Bearer ${key}` } : init.headers;
  const res = await fetch(path, { ...init, headers });
  if (res.status === 401 && key === apiKey()) window.dispatchEvent(new CustomEvent(UNAUTHORIZED_EVENT));
  return res;
}

async function failure(res) {
  const text = await res.text();
  let msg;
  try {
    msg = JSON.parse(text).error?.message ?? text;
  } catch {
    msg = `HTTP ${res.status}: ${text.slice(0, 300)}`;
  }
  if (res.status !== 401) return new Error(msg);
  return new Error('the operator key is missing or wrong: paste it at the top right');
}

export async function getJson(path) {
  const res = await call(path);
  if (!res.ok) throw await failure(res);
  return res.json();
}

export async function sendJson(method, path, body) {
  const res = await call(path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw await failure(res);
  return res.json();
}

/** The envelope version and schema the console writes (src/events/eventTypes.ts). */
const SCHEMA_VERSION = '1.1.0';
const DATA_SCHEMA_URI = `https://amf.spec/schemas/event-envelope/${SCHEMA_VERSION}`;

/**
 * Sends one AMF CloudEvent through `POST /publish` as the operator (the only caller that may
 * announce or cancel tasks there). Who sent it is stamped by the coordinator, not taken from here:
 * the source and auth context below are placeholders it replaces.
 * @param {string} type
 * @param {object} payload
 * @param {{ taskId?: string, traceId?: string, ttlSeconds?: number }} [options]
 */
export function publishEvent(type, payload, { taskId, traceId, ttlSeconds = 60 } = {}) {
  const event = {
    specversion: '1.0',
    id: crypto.randomUUID(),
    source: 'amf:operator',
    type,
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    dataschema: DATA_SCHEMA_URI,
    amfagentrole: 'connector',
    amfvisibility: 'local',
    amfconfidence: '1.0',
    amfttl: ttlSeconds,
    amfschemaversion: SCHEMA_VERSION,
    amftraceid: traceId ?? crypto.randomUUID(),
    data: { payload, auth_context: { identity: 'amf:operator', trust_domain: 'local' } },
  };
  if (taskId) {
    event.amftaskid = taskId;
    event.subject = taskId;
  }
  return sendJson('POST', '/publish', event);
}

/** Yields the data of each SSE frame of a fetch response. */
export async function* sseData(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data) yield data;
      end = buffer.indexOf('\n\n');
    }
  }
}

/** Opens the live event stream; calls onEvent(event) per event, onState(state, text) on changes. */
export function openLiveEvents(onEvent, onState) {
  let stopped = false;
  let controller;
  const run = async () => {
    let delay = 1000;
    while (!stopped) {
      controller = new AbortController();
      try {
        onState('warn', 'live: connecting…');
        const res = await call('/events?subject=amf.>', {
          headers: { accept: 'text/event-stream' },
          signal: controller.signal,
        });
        if (!res.ok) throw await failure(res);
        onState('ok', 'live');
        delay = 1000;
        for await (const data of sseData(res)) {
          try {
            onEvent(JSON.parse(data));
          } catch {
            /* a frame that is not JSON is skipped */
          }
        }
        onState('warn', 'live: reconnecting…');
      } catch (err) {
        if (stopped) return;
        onState('bad', `live: ${err instanceof Error ? err.message : String(err)}`);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 15000);
    }
  };
  void run();
  return () => {
    stopped = true;
    controller?.abort();
  };
}

/** A minimal MCP client over Streamable HTTP: initialize once, then JSON-RPC requests. */
export class McpClient {
  constructor(path = '/mcp') {
    this.path = path;
    this.session = undefined;
    this.nextId = 1;
  }

  async post(message) {
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
    };
    if (this.session) headers['mcp-session-id'] = this.session;
    const res = await call(this.path, { method: 'POST', headers, body: JSON.stringify(message) });
    if (!res.ok) throw await failure(res);
    const session = res.headers.get('mcp-session-id');
    if (session) this.session = session;
    if (message.id === undefined) return undefined;
    const type = res.headers.get('content-type') || '';
    if (type.includes('text/event-stream')) {
      for await (const data of sseData(res)) {
        const msg = JSON.parse(data);
        if (msg.id === message.id) return msg;
      }
      throw new Error('the MCP stream ended without an answer');
    }
    return res.json();
  }

  async request(method, params) {
    if (!this.session && method !== 'initialize') await this.initialize();
    const answer = await this.post({ jsonrpc: '2.0', id: this.nextId++, method, params });
    if (answer.error) throw new Error(`MCP ${answer.error.code}: ${answer.error.message}`);
    return answer.result;
  }

  async initialize() {
    await this.request('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'amf-console', version: '1' },
    });
    await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
  }
}
