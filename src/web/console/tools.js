// Tools: the federated MCP catalog (GET /tools) and a playground whose form is built from the chosen
// tool's input schema; the call goes through the coordinator's /mcp like any MCP client's would
// (policy and audit included). The resources, resource templates and prompts `/mcp` federates are
// listed below it: a resource is read and a prompt fetched through /mcp as well.
import { h, fill, agentName, table, empty, errorBox, json } from './dom.js';
import { getJson, McpClient } from './api.js';

const mcp = new McpClient();

/** One form control per top-level schema property; anything else is edited as JSON. */
function fieldFor(name, prop, required) {
  const id = `arg-${name}`;
  const label = `${name}${required ? ' *' : ''}`;
  const hint = prop.description ? h('span', { class: 'muted' }, prop.description) : null;
  let control;
  if (Array.isArray(prop.enum))
    control = h(
      'select',
      { id, name },
      prop.enum.map((v) => h('option', { value: String(v) }, String(v))),
    );
  else if (prop.type === 'boolean') control = h('input', { id, name, type: 'checkbox' });
  else if (prop.type === 'number' || prop.type === 'integer')
    control = h('input', { id, name, type: 'number', step: prop.type === 'integer' ? '1' : 'any', required });
  else if (prop.type === 'string')
    control = h(prop.maxLength && prop.maxLength <= 200 ? 'input' : 'textarea', {
      id,
      name,
      required,
      rows: 3,
    });
  else
    control = h('textarea', {
      id,
      name,
      required,
      rows: 3,
      placeholder: 'JSON',
      'data-json': 'true',
      class: 'mono',
    });
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
    this.resources = h('div', { class: 'panel', role: 'region', 'aria-labelledby': 'h-resources' });
    this.prompts = h('div', { class: 'panel', role: 'region', 'aria-labelledby': 'h-prompts' });
    this.extraOutput = h('div', { 'aria-live': 'polite' });
    fill(
      section,
      h('h2', { id: 'h-tools' }, 'Tools'),
      h(
        'div',
        { class: 'toolbar' },
        h('button', { type: 'button', onclick: () => this.load() }, 'Refresh'),
        h(
          'span',
          { class: 'muted' },
          'The federated MCP catalog served at /mcp (also: amf mcp for desktop clients).',
        ),
      ),
      h('div', { class: 'split' }, this.catalog, this.playground),
      h(
        'div',
        { class: 'split' },
        h(
          'div',
          {},
          h('h3', { id: 'h-resources' }, 'Resources'),
          this.resources,
          h('h3', { id: 'h-prompts' }, 'Prompts'),
          this.prompts,
        ),
        this.extraOutput,
      ),
    );
  },
  show(param) {
    this.param = param;
    void this.load();
  },
  async load() {
    let catalog;
    try {
      catalog = await getJson('/tools');
      this.tools = catalog.tools;
    } catch (err) {
      fill(this.catalog, errorBox(err));
      return;
    }
    this.renderExtras(catalog);
    const rows = this.tools.map((t) =>
      h(
        'tr',
        {},
        h('td', {}, h('a', { href: `#/tools/${encodeURIComponent(t.wire_name)}` }, t.wire_name)),
        h('td', {}, agentName(t.agent_id)),
        h('td', { class: 'wrap' }, t.description.replace(/^\[[^\]]*\]\s*/, '')),
      ),
    );
    fill(
      this.catalog,
      rows.length
        ? table(['Tool', 'Agent', 'Description'], rows)
        : empty('No tools: no live agent serves MCP tools.'),
    );
    this.renderPlayground();
  },
  /** The federated resources (with templates) and prompts, each with its agent and an action. */
  renderExtras({ resources = [], resource_templates: templates = [], prompts = [] }) {
    const resourceRows = [
      ...resources.map((r) =>
        h(
          'tr',
          {},
          h('td', { class: 'mono wrap' }, r.uri),
          h('td', {}, r.name),
          h('td', {}, agentName(r.agent_id)),
          h('td', { class: 'wrap' }, r.description.replace(/^\[[^\]]*\]\s*/, '')),
          h(
            'td',
            {},
            h(
              'button',
              { type: 'button', 'aria-label': `Read ${r.uri}`, onclick: () => this.read(r.uri) },
              'Read',
            ),
          ),
        ),
      ),
      ...templates.map((r) =>
        h(
          'tr',
          {},
          h('td', { class: 'mono wrap' }, r.uri_template),
          h('td', {}, r.name),
          h('td', {}, agentName(r.agent_id)),
          h('td', { class: 'wrap' }, r.description.replace(/^\[[^\]]*\]\s*/, '')),
          h('td', { class: 'muted' }, 'template'),
        ),
      ),
    ];
    fill(
      this.resources,
      resourceRows.length
        ? table(['URI', 'Name', 'Agent', 'Description', ''], resourceRows)
        : empty('No live agent serves MCP resources.'),
    );
    const promptRows = prompts.map((p) =>
      h(
        'tr',
        {},
        h('td', { class: 'mono' }, p.name),
        h('td', {}, agentName(p.agent_id)),
        h('td', { class: 'wrap' }, p.description.replace(/^\[[^\]]*\]\s*/, '')),
        h('td', {}, p.arguments.map((a) => `${a.name}${a.required ? ' *' : ''}`).join(', ')),
        h(
          'td',
          {},
          h(
            'button',
            { type: 'button', 'aria-label': `Use prompt ${p.name}`, onclick: () => this.promptForm(p) },
            'Use',
          ),
        ),
      ),
    );
    fill(
      this.prompts,
      promptRows.length
        ? table(['Prompt', 'Agent', 'Description', 'Arguments', ''], promptRows)
        : empty('No live agent serves MCP prompts.'),
    );
  },
  /** resources/read through /mcp; text contents shown as text, others as JSON. */
  async read(uri) {
    fill(this.extraOutput, h('p', { class: 'muted' }, `reading ${uri}…`));
    try {
      const result = await mcp.request('resources/read', { uri });
      const parts = (result.contents ?? []).map((c) =>
        typeof c.text === 'string' ? c.text : JSON.stringify(c, null, 2),
      );
      fill(
        this.extraOutput,
        h(
          'div',
          { class: 'card' },
          h('h3', { class: 'flush' }, `Resource ${uri}`),
          h('pre', { class: 'json', 'aria-label': 'Resource content' }, parts.join('\n')),
        ),
      );
    } catch (err) {
      fill(this.extraOutput, errorBox(err));
    }
  },
  /** A form for the prompt's arguments; prompts/get through /mcp shows the messages it gives. */
  promptForm(prompt) {
    const fields = prompt.arguments.map((a) => {
      const id = `prompt-arg-${a.name}`;
      return h(
        'label',
        { for: id },
        `${a.name}${a.required ? ' *' : ''}`,
        h('input', { id, name: a.name, required: a.required === true }),
        a.description ? h('span', { class: 'muted' }, a.description) : null,
      );
    });
    const output = h('div', { 'aria-live': 'polite' });
    const form = h(
      'form',
      { class: 'form-grid', 'aria-label': `Get prompt ${prompt.name}` },
      fields,
      h('div', {}, h('button', { type: 'submit', class: 'primary' }, `Get ${prompt.name}`)),
    );
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const args = Object.fromEntries(
        [...form.querySelectorAll('input[name]')]
          .filter((el) => el.value !== '')
          .map((el) => [el.name, el.value]),
      );
      try {
        const result = await mcp.request('prompts/get', { name: prompt.name, arguments: args });
        fill(
          output,
          h(
            'ol',
            { class: 'prompt-messages', 'aria-label': 'Prompt messages' },
            (result.messages ?? []).map((m) =>
              h(
                'li',
                {},
                h('strong', {}, `${m.role}: `),
                m.content?.type === 'text' ? m.content.text : JSON.stringify(m.content),
              ),
            ),
          ),
        );
      } catch (err) {
        fill(output, errorBox(err));
      }
    });
    fill(
      this.extraOutput,
      h(
        'div',
        { class: 'card' },
        h('h3', { class: 'flush' }, `Prompt ${prompt.name}`),
        h('p', { class: 'muted' }, prompt.description),
        form,
        output,
      ),
    );
  },
  renderPlayground() {
    const tool = this.tools?.find((t) => t.wire_name === this.param) ?? this.tools?.[0];
    if (!tool) return fill(this.playground);
    const schema = tool.input_schema ?? { type: 'object' };
    const required = new Set(schema.required ?? []);
    const fields = Object.entries(schema.properties ?? {}).map(([name, prop]) =>
      fieldFor(name, prop, required.has(name)),
    );
    const output = h('div', { 'aria-live': 'polite' });
    const submit = h('button', { type: 'submit', class: 'primary' }, `Call ${tool.wire_name}`);
    const form = h(
      'form',
      { class: 'form-grid', 'aria-label': `Call ${tool.wire_name}` },
      fields,
      h('div', {}, submit),
    );
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      submit.disabled = true;
      fill(output, h('p', { class: 'muted' }, 'calling…'));
      try {
        const result = await mcp.request('tools/call', {
          name: tool.wire_name,
          arguments: readArgs(form, schema),
        });
        const text = (result.content ?? [])
          .filter((c) => c.type === 'text')
          .map((c) => c.text)
          .join('\n');
        fill(
          output,
          h('h3', {}, result.isError ? 'Tool error' : 'Result'),
          h(
            'pre',
            { class: `json ${result.isError ? 'reason' : ''}`, 'aria-label': 'Tool result' },
            text || JSON.stringify(result, null, 2),
          ),
        );
      } catch (err) {
        fill(output, errorBox(err));
      } finally {
        submit.disabled = false;
      }
    });
    fill(
      this.playground,
      h(
        'div',
        { class: 'card' },
        h('h3', { class: 'flush' }, `Playground: ${tool.wire_name}`),
        h('p', { class: 'muted' }, tool.description),
        form,
        output,
        h('details', {}, h('summary', {}, 'Input schema'), json(schema)),
      ),
    );
  },
};
