// The coordinator's HTTP API as the console uses it: JSON calls with the API key (kept in
// sessionStorage for this tab only), SSE read through fetch (so the key goes in a header, not the
// URL), and a minimal MCP client for the federated /mcp endpoint.

const KEY_STORE = 'amf.apiKey';

export function apiKey() {
  try {
    return sessionStorage.getItem(KEY_STORE) || '';
  } catch {
    return '';
  }
}

export function setApiKey(value) {
  try {
    if (value) sessionStorage.setItem(KEY_STORE, value);
    else sessionStorage.removeItem(KEY_STORE);
  } catch {
    /* storage disabled: the key lasts until reload */
  }
}

function withAuth(headers = {}) {
  const key = apiKey();
  return key ? { ...headers, authorization: `Bearer ${key}` } : headers;
}

/** fetch with the API key. */
export function call(path, init = {}) {
  return fetch(path, { ...init, headers: withAuth(init.headers) });
}

async function failure(res) {
  const text = await res.text();
  try {
    const body = JSON.parse(text);
    const msg = body.error?.message ?? text;
    return new Error(res.status === 401 ? `${msg} (enter the API key at the top right)` : msg);
  } catch {
    return new Error(`HTTP ${res.status}: ${text.slice(0, 300)}`);
  }
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
        onState('bad', `live: ${err.message}`);
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
