/**
 * The small chat page of a webchat interface (`GET <path>/ui`): one self-contained HTML document,
 * no external assets, served with a strict Content-Security-Policy (a fresh nonce for its one script
 * and one style). Answers are rendered with textContent only, so agent output can never become markup.
 */
import { randomBytes } from 'node:crypto';

export interface ChatPageInfo {
  name: string;
  description: string;
  version: string;
  /** Where the page posts (the webchat path). */
  chatPath: string;
  /** The signature takes a plain string (else the page sends the text as JSON). */
  stringInput: boolean;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Renders the page; returns the HTML and the CSP header that allows exactly its script and style. */
export function renderChatPage(info: ChatPageInfo): { html: string; csp: string } {
  const nonce = randomBytes(16).toString('base64');
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(info.name)}</title>
<style nonce="${nonce}">
body{font:15px/1.45 system-ui,sans-serif;margin:0;display:flex;flex-direction:column;height:100vh;background:#f6f7f9;color:#1d2330}
header{padding:12px 18px;background:#1d2330;color:#fff}header h1{font-size:17px;margin:0}header p{margin:2px 0 0;font-size:13px;opacity:.8}
#log{flex:1;overflow-y:auto;padding:14px 18px}
.msg{max-width:48em;margin:8px 0;padding:8px 12px;border-radius:8px;white-space:pre-wrap;word-wrap:break-word}
.user{background:#dbe7ff;margin-left:auto}.agent{background:#fff;border:1px solid #dde}.error{background:#ffe1e1}
.note{font-size:12px;color:#667}
form{display:flex;gap:8px;padding:12px 18px;background:#fff;border-top:1px solid #dde}
textarea{flex:1;font:inherit;padding:8px;min-height:42px;resize:vertical}button{font:inherit;padding:8px 16px}
</style>
</head>
<body data-path="${escapeHtml(info.chatPath)}" data-string-input="${info.stringInput ? '1' : '0'}">
<header><h1>${escapeHtml(info.name)} <span class="note">v${escapeHtml(info.version)}</span></h1>
<p>${escapeHtml(info.description)}</p></header>
<main id="log" aria-live="polite"></main>
<form id="form"><textarea id="input" placeholder="${info.stringInput ? 'Message' : 'JSON input'}" required></textarea>
<button id="send" type="submit">Send</button></form>
<script nonce="${nonce}">
(() => {
  const body = document.body;
  const path = body.dataset.path;
  const stringInput = body.dataset.stringInput === '1';
  let session = sessionStorage.getItem('afm-session');
  if (!session) { session = crypto.randomUUID(); sessionStorage.setItem('afm-session', session); }
  const log = document.getElementById('log');
  const input = document.getElementById('input');
  const send = document.getElementById('send');
  const add = (cls, text) => {
    const div = document.createElement('div');
    div.className = 'msg ' + cls;
    div.textContent = text;
    log.appendChild(div);
    log.scrollTop = log.scrollHeight;
    return div;
  };
  async function ask(text) {
    add('user', text);
    const out = add('agent', '');
    const res = await fetch(path, {
      method: 'POST',
      headers: { 'Content-Type': stringInput ? 'text/plain' : 'application/json',
                 Accept: 'text/event-stream', 'X-Session-Id': session },
      body: text,
    });
    if (!res.ok || !res.body) {
      let message = 'HTTP ' + res.status;
      try { message = (await res.json()).error.message; } catch (e) { /* not JSON */ }
      out.className = 'msg error'; out.textContent = message; return;
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf('\\n\\n')) >= 0) {
        const frame = buffer.slice(0, end); buffer = buffer.slice(end + 2);
        const type = (/^event: (.*)$/m.exec(frame) || [])[1];
        const data = JSON.parse((/^data: (.*)$/m.exec(frame) || [])[1] || 'null');
        if (type === 'delta') out.textContent += data.text;
        else if (type === 'done') {
          if (typeof data.output !== 'string') out.textContent = JSON.stringify(data.output, null, 2);
          else if (!out.textContent) out.textContent = data.output;
          if (data.stop_reason) add('note', 'stopped: ' + data.stop_reason);
        } else if (type === 'error') { out.className = 'msg error'; out.textContent = data.message; }
      }
    }
  }
  document.getElementById('form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = ''; send.disabled = true;
    try { await ask(text); } catch (e) { add('error', String(e)); } finally { send.disabled = false; input.focus(); }
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); document.getElementById('form').requestSubmit(); }
  });
})();
</script>
</body>
</html>
`;
  return { html, csp };
}
