// Tools: the federated MCP catalog (GET /tools) and a playground whose form is built from the chosen
// tool's input schema; the call goes through the coordinator's /mcp like any MCP client's would
// (policy and audit included).
import { h, fill, agentName, table, empty, errorBox, json } from './dom.js';
import { getJson, McpClient } from './api.js';

const mcp = new McpClient();

/** One form control per top-level schema property; anything else is edited as JSON. */
function fieldFor(name, prop, required) {
  const id = `arg-${name}`;
  const label = `${name}${required ? ' *' : ''}`;
  const hint = prop.description ? h('span', { class: 'muted' }, prop.description) : null;
  let control;
  if (Array.isArray(prop.enum)) control = h('select', { id, name }, prop.enum.map((v) => h('option', { value: String(v) }, String(v))));
  else if (prop.type === 'boolean') control = h('input', { id, name, type: 'checkbox' });
  else if (prop.type === 'number' || prop.type === 'integer') control = h('input', { id, name, type: 'number', step: prop.type === 'integer' ? '1' : 'any', required });
  else if (prop.type === 'string') control = h(prop.maxLength && prop.maxLength <= 200 ? 'input' : 'textarea', { id, name, required, rows: 3 });
  else control = h('textarea', { id, name, required, rows: 3, placeholder: 'JSON', 'data-json': 'true', class: 'mono' });
  control.dataset.type = prop.type ?? 'json';
  return h('label', { for: id }, label, control, hint);
}

function readArgs(form, schema) {
  const args = {};
  for (const el of form.querySelectorAll('[name]')) {
    const type = el.dataset.type;
    if (type === 'boolean') args[el.name] = el.checked;
    else if (el.value === '') continue;
    else if (type === 'number' || type === 'integer') args[el.name] = Number(el.value);
    else if (type === 'string') args[el.name] = el.value;
    else if (schema.properties?.[el.name]?.enum) args[el.name] = el.value;
    else {
      try {
        args[el.name] = JSON.parse(el.value);
      } catch {
        throw new Error(`${el.name} is not valid JSON`);
      }
    }
  }
  return args;
}

export const toolsView = {
  name: 'tools',
  title: 'Tools',
  mount(section) {
    this.catalog = h('div', { class: 'panel' });
    this.playground = h('div');
    fill(section, h('h2', { id: 'h-tools' }, 'Tools'),
      h('div', { class: 'toolbar' }, h('button', { type: 'button', onclick: () => this.load() }, 'Refresh'),
        h('span', { class: 'muted' }, 'The federated MCP catalog served at /mcp (also: amf mcp for desktop clients).')),
      h('div', { class: 'split' }, this.catalog, this.playground));
  },
  show(param) {
    this.param = param;
    void this.load();
  },
  async load() {
    try {
      this.tools = (await getJson('/tools')).tools;
    } catch (err) {
      fill(this.catalog, errorBox(err));
      return;
    }
    const rows = this.tools.map((t) => h('tr', {},
      h('td', {}, h('a', { href: `#/tools/${encodeURIComponent(t.wire_name)}` }, t.wire_name)),
      h('td', {}, agentName(t.agent_id)),
      h('td', { class: 'wrap' }, t.description.replace(/^\[[^\]]*\]\s*/, ''))));
    fill(this.catalog, rows.length ? table(['Tool', 'Agent', 'Description'], rows) : empty('No tools: no live agent serves MCP tools.'));
    this.renderPlayground();
  },
  renderPlayground() {
    const tool = this.tools?.find((t) => t.wire_name === this.param) ?? this.tools?.[0];
    if (!tool) return fill(this.playground);
    const schema = tool.input_schema ?? { type: 'object' };
    const required = new Set(schema.required ?? []);
    const fields = Object.entries(schema.properties ?? {}).map(([name, prop]) => fieldFor(name, prop, required.has(name)));
    const output = h('div', { 'aria-live': 'polite' });
    const submit = h('button', { type: 'submit', class: 'primary' }, `Call ${tool.wire_name}`);
    const form = h('form', { class: 'form-grid', 'aria-label': `Call ${tool.wire_name}` }, fields, h('div', {}, submit));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      submit.disabled = true;
      fill(output, h('p', { class: 'muted' }, 'calling…'));
      try {
        const result = await mcp.request('tools/call', { name: tool.wire_name, arguments: readArgs(form, schema) });
        const text = (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
        fill(output, h('h3', {}, result.isError ? 'Tool error' : 'Result'),
          h('pre', { class: `json ${result.isError ? 'reason' : ''}`, 'aria-label': 'Tool result' }, text || JSON.stringify(result, null, 2)));
      } catch (err) {
        fill(output, errorBox(err));
      } finally {
        submit.disabled = false;
      }
    });
    fill(this.playground, h('div', { class: 'card' },
      h('h3', { class: 'flush' }, `Playground: ${tool.wire_name}`),
      h('p', { class: 'muted' }, tool.description),
      form, output,
      h('details', {}, h('summary', {}, 'Input schema'), json(schema))));
  },
};
