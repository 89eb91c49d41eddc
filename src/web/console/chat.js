// Chat: a multi-turn conversation with any amf/<tag> model through POST /v1/chat/completions,
// streamed; the whole conversation is sent each turn (the OpenAI API is stateless).
import { h, fill, errorBox, messageOf } from './dom.js';
import { call, getJson, sseData } from './api.js';

export const chatView = {
  name: 'chat',
  title: 'Chat',
  mount(section) {
    this.messages = [];
    this.model = h('select', { id: 'chat-model', 'aria-label': 'Model' });
    this.log = h('div', {
      class: 'chat-log panel',
      role: 'log',
      'aria-live': 'polite',
      'aria-label': 'Conversation',
    });
    this.input = h('textarea', {
      id: 'chat-input',
      'aria-label': 'Message',
      placeholder: 'Ask the mesh… (Enter sends, Shift+Enter for a new line)',
    });
    this.send = h('button', { type: 'submit', class: 'primary' }, 'Send');
    this.stop = h('button', { type: 'button', disabled: true, onclick: () => this.abort?.abort() }, 'Stop');
    const form = h(
      'form',
      { class: 'chat-form', 'aria-label': 'Send a message' },
      this.input,
      h('div', { class: 'stack' }, this.send, this.stop),
    );
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      void this.ask();
    });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) {
        e.preventDefault();
        void this.ask();
      }
    });
    fill(
      section,
      h('h2', { id: 'h-chat' }, 'Chat'),
      h(
        'div',
        { class: 'toolbar' },
        h('label', { for: 'chat-model' }, 'Model'),
        this.model,
        h('button', { type: 'button', onclick: () => this.loadModels() }, 'Reload models'),
        h('button', { type: 'button', onclick: () => this.reset() }, 'New conversation'),
      ),
      this.log,
      form,
    );
  },
  show() {
    void this.loadModels();
  },
  async loadModels() {
    const keep = this.model.value;
    try {
      const { data } = await getJson('/v1/models');
      fill(
        this.model,
        data.map((m) => h('option', { value: m.id }, m.id)),
      );
      if (data.some((m) => m.id === keep)) this.model.value = keep;
      if (data.length === 0) fill(this.model, h('option', { value: '' }, 'no models: no live agent'));
    } catch (err) {
      fill(this.model, h('option', { value: '' }, `models unavailable: ${messageOf(err)}`));
    }
  },
  reset() {
    this.abort?.abort();
    this.messages = [];
    fill(this.log);
  },
  bubble(role, text) {
    const el = h('div', { class: `msg ${role}` }, text);
    this.log.append(el);
    this.log.scrollTop = this.log.scrollHeight;
    return el;
  },
  async ask() {
    const text = this.input.value.trim();
    if (!text || this.abort || !this.model.value) return;
    this.input.value = '';
    this.messages.push({ role: 'user', content: text });
    this.bubble('user', text);
    const answer = this.bubble('assistant', '…');
    this.abort = new AbortController();
    this.send.disabled = true;
    this.stop.disabled = false;
    let content = '';
    try {
      const res = await call('/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: this.model.value, messages: this.messages, stream: true }),
        signal: this.abort.signal,
      });
      if (!res.ok) {
        const body = await res.json().catch(() => ({}));
        throw new Error(body.error?.message ?? `HTTP ${res.status}`);
      }
      for await (const data of sseData(res)) {
        if (data === '[DONE]') break;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        content += chunk.choices?.[0]?.delta?.content ?? '';
        answer.textContent = content || '…';
        this.log.scrollTop = this.log.scrollHeight;
      }
      this.messages.push({ role: 'assistant', content });
    } catch (err) {
      answer.replaceWith(errorBox(err instanceof Error && err.name === 'AbortError' ? 'stopped' : err));
      if (content) this.messages.push({ role: 'assistant', content });
      else this.messages.pop();
    } finally {
      this.abort = undefined;
      this.send.disabled = false;
      this.stop.disabled = true;
      this.input.focus();
    }
  },
};
