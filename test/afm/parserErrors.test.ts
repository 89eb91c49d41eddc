// AFM validator: every invalid front matter is reported with its line, column and a message that
// says what was wrong and what was expected; all problems are collected, not only the first.
import { describe, expect, it } from 'vitest';
import { parseAfm } from '../../src/afm/index.js';

const BODY = '# Role\n\nYou help.\n\n# Instructions\n\nBe kind.\n';
type Expected = [position: string, severity: 'error' | 'note', message: string];

// [case, front matter (file line 2 onwards), every problem expected]
const CASES: [string, string, Expected[]][] = [
  [
    'unknown top key',
    'colour: blue',
    [
      [
        '2:1',
        'error',
        "unknown key 'colour' in front matter; allowed keys: spec_version, name, description, version, author, authors, provider, icon_url, license, model, interfaces, tools, max_iterations, x-amf",
      ],
    ],
  ],
  [
    'unknown nested key',
    'model:\n  name: m\n  temperature: 0.2',
    [
      [
        '4:3',
        'error',
        "unknown key 'temperature' in model; allowed keys: name, provider, url, authentication",
      ],
    ],
  ],
  ['wrong type', 'name: [a, b]', [['2:7', 'error', 'name must be a string, not a list']]],
  ['version type', 'version: 1.0', [['2:10', 'error', 'version must be a string, not number 1']]],
  [
    'authors not list',
    'authors: "A <a@x>"',
    [['2:10', 'error', 'authors must be a list, not the string "A <a@x>"']],
  ],
  [
    'provider organization',
    'provider:\n  organization: Acme',
    [['3:3', 'error', "unknown key 'organization' in provider; allowed keys: name, url"]],
  ],
  [
    'max_iterations float',
    'max_iterations: 2.5',
    [['2:17', 'error', 'max_iterations must be an integer, not number 2.5']],
  ],
  ['max_iterations too big', 'max_iterations: 5000', [['2:17', 'error', 'max_iterations must be <= 1000']]],
  [
    'interfaces empty',
    'interfaces: []',
    [
      [
        '2:13',
        'error',
        'interfaces must list at least one interface (leave it out for the default consolechat)',
      ],
    ],
  ],
  [
    'interface no type',
    'interfaces:\n  - signature: {}',
    [['3:5', 'error', "interfaces[0] is missing the required key 'type'"]],
  ],
  [
    'interface bad type',
    'interfaces:\n  - type: platformchat',
    [
      [
        '3:11',
        'error',
        'interfaces[0].type must be one of consolechat, webchat or webhook, not the string "platformchat"',
      ],
    ],
  ],
  [
    'consolechat exposure',
    'interfaces:\n  - type: consolechat\n    exposure:\n      http:\n        path: /x',
    [['4:5', 'error', "unknown key 'exposure' in interfaces[0]; allowed keys: type, signature"]],
  ],
  [
    'webchat prompt',
    'interfaces:\n  - type: webchat\n    prompt: hi',
    [['4:5', 'error', "unknown key 'prompt' in interfaces[0]; allowed keys: type, signature, exposure"]],
  ],
  [
    'duplicate interface',
    'interfaces:\n  - type: webhook\n  - type: webhook\n    exposure: {http: {path: /other}}',
    [['4:11', 'error', "a second 'webhook' interface (the first is interfaces[0]): one interface per type"]],
  ],
  [
    'path collision',
    'interfaces:\n  - type: webchat\n    exposure: {http: {path: /in}}\n  - type: webhook\n    exposure: {http: {path: /in}}',
    [['6:29', 'error', "path '/in' is already used by interfaces[0]"]],
  ],
  [
    'reserved path',
    'interfaces:\n  - type: webchat\n    exposure: {http: {path: /mcp}}',
    [['4:29', 'error', "path '/mcp' is served by the AMF worker itself (/mcp); choose another"]],
  ],
  [
    'bad path',
    'interfaces:\n  - type: webchat\n    exposure: {http: {path: "/a?b"}}',
    [
      [
        '4:29',
        'error',
        'interfaces[0].exposure.http.path must be a URL path starting with "/" (no query or fragment), e.g. /chat',
      ],
    ],
  ],
  [
    'signature not schema',
    'interfaces:\n  - type: webchat\n    signature:\n      input:\n        type: strin',
    [
      [
        '6:15',
        'error',
        'signature.input is not a valid JSON Schema: type must be equal to one of the allowed values: array, boolean, integer, null, number, object, string',
      ],
    ],
  ],
  [
    'signature not mapping',
    'interfaces:\n  - type: webchat\n    signature:\n      input: string',
    [['5:14', 'error', 'interfaces[0].signature.input must be a mapping, not the string "string"']],
  ],
  [
    'signature unknown key',
    'interfaces:\n  - type: webchat\n    signature:\n      inputs: {type: string}',
    [['5:7', 'error', "unknown key 'inputs' in interfaces[0].signature; allowed keys: input, output"]],
  ],
  [
    'subscription no protocol',
    'interfaces:\n  - type: webhook\n    subscription:\n      hub: http://127.0.0.1/hub\n      topic: http://127.0.0.1/t',
    [['5:7', 'error', "interfaces[0].subscription is missing the required key 'protocol'"]],
  ],
  [
    'subscription other protocol',
    'interfaces:\n  - type: webhook\n    subscription:\n      protocol: pubsubhubbub2',
    [['5:17', 'error', "subscription protocol 'pubsubhubbub2' is not supported: AMF supports websub"]],
  ],
  [
    'subscription hub without topic',
    'interfaces:\n  - type: webhook\n    subscription:\n      protocol: websub\n      hub: http://127.0.0.1/hub',
    [
      [
        '5:7',
        'error',
        'subscription needs both hub and topic to subscribe (or neither, when registered by hand)',
      ],
    ],
  ],
  [
    'subscription bad hub',
    'interfaces:\n  - type: webhook\n    subscription:\n      protocol: websub\n      hub: ftp://x/hub\n      topic: http://x/t',
    [['6:12', 'error', "subscription hub 'ftp://x/hub' must be an http or https URL"]],
  ],
  [
    'prompt bad variable',
    'interfaces:\n  - type: webhook\n    prompt: "Event ${http:payload.} and ${http:body.x}"',
    [
      [
        '4:20',
        'error',
        "invalid http variable ${http:payload.}: empty field name at position 1 (use ['…'] for unusual keys)",
      ],
      [
        '4:41',
        'error',
        "unknown http variable prefix 'body' in ${http:body.x}: expected http:payload or http:header",
      ],
    ],
  ],
  [
    'prompt header no name',
    'interfaces:\n  - type: webhook\n    prompt: |\n      first line\n      from ${http:header}',
    [
      [
        '6:12',
        'error',
        'invalid http variable ${http:header}: expected ${http:header.NAME} with a header name such as User-Agent',
      ],
    ],
  ],
  [
    'http var outside prompt',
    'model:\n  url: "${http:payload.url}"',
    [
      [
        '3:9',
        'error',
        '${http:payload.url}: http variables are only allowed in the prompt of a webhook interface',
      ],
    ],
  ],
  [
    'http var in webchat prompt position',
    'interfaces:\n  - type: webchat\n  - type: webhook\n    prompt: "${http:payload.a}"\nlicense: "${http:header.X}"',
    [
      [
        '6:11',
        'error',
        '${http:header.X}: http variables are only allowed in the prompt of a webhook interface',
      ],
    ],
  ],
  [
    'unsupported prefix',
    'license: "${vault:abc}"',
    [['2:11', 'error', "${vault:abc}: unsupported variable prefix 'vault:' (use env:, file: or secret:)"]],
  ],
  [
    'bad env name',
    'license: "${env:1ABC}"',
    [['2:11', 'error', "${env:1ABC}: '1ABC' is not an environment variable name"]],
  ],
  [
    'auth no type',
    'model:\n  authentication:\n    token: abc',
    [['4:5', 'error', "model.authentication is missing the required key 'type'"]],
  ],
  [
    'auth bearer no token',
    'model:\n  authentication:\n    type: bearer',
    [['4:5', 'error', "bearer authentication needs 'token'"]],
  ],
  [
    'auth basic missing password',
    'model:\n  authentication:\n    type: basic\n    username: u',
    [['4:5', 'error', "basic authentication needs 'password'"]],
  ],
  [
    'auth api-key wrong field',
    'model:\n  authentication:\n    type: api-key\n    key: k',
    [
      ['4:5', 'error', "api-key authentication needs 'api_key'"],
      ['5:5', 'error', "unknown key 'key' in api-key authentication; allowed keys: type, api_key, header"],
    ],
  ],
  [
    'auth unsupported',
    'model:\n  authentication:\n    type: oauth2\n    client_id: x',
    [
      [
        '4:11',
        'error',
        "authentication type 'oauth2' is not supported by AMF: use bearer (token), basic (username, password) or api-key (api_key)",
      ],
    ],
  ],
  [
    'auth token number',
    'model:\n  authentication:\n    type: bearer\n    token: 123',
    [['5:12', 'error', "'token' must be a non-empty string"]],
  ],
  [
    'mcp no name',
    'tools:\n  mcp:\n    - transport: {type: http, url: "http://127.0.0.1/mcp"}',
    [['4:7', 'error', "tools.mcp[0] is missing the required key 'name'"]],
  ],
  [
    'mcp bad name',
    'tools:\n  mcp:\n    - name: "my server"\n      transport: {type: http, url: "http://127.0.0.1/mcp"}',
    [
      [
        '4:13',
        'error',
        'tools.mcp[0].name must be 1-64 characters of letters, digits, "_", "." or "-" (it prefixes tool names)',
      ],
    ],
  ],
  [
    'mcp dup names',
    'tools:\n  mcp:\n    - name: a\n      transport: {type: http, url: "http://127.0.0.1/mcp"}\n    - name: a\n      transport: {type: stdio, command: x}',
    [['6:13', 'error', "MCP server name 'a' is already used by tools.mcp[0]; names must be unique"]],
  ],
  [
    'mcp no transport',
    'tools:\n  mcp:\n    - name: a',
    [['4:7', 'error', "tools.mcp[0] is missing the required key 'transport'"]],
  ],
  [
    'mcp transport sse',
    'tools:\n  mcp:\n    - name: a\n      transport: {type: sse, url: "http://127.0.0.1/sse"}',
    [['5:25', 'error', 'tools.mcp[0].transport.type must be one of http or stdio, not the string "sse"']],
  ],
  [
    'mcp http no url',
    'tools:\n  mcp:\n    - name: a\n      transport: {type: http}',
    [['5:18', 'error', "tools.mcp[0].transport is missing the required key 'url'"]],
  ],
  [
    'mcp http with command',
    'tools:\n  mcp:\n    - name: a\n      transport: {type: http, url: "http://127.0.0.1/m", command: x}',
    [
      [
        '5:58',
        'error',
        "unknown key 'command' in tools.mcp[0].transport; allowed keys: type, url, authentication",
      ],
    ],
  ],
  [
    'mcp bad url',
    'tools:\n  mcp:\n    - name: a\n      transport: {type: http, url: "file:///etc/passwd"}',
    [['5:36', 'error', "MCP server url 'file:///etc/passwd' must be an http or https URL"]],
  ],
  [
    'mcp stdio env bad',
    'tools:\n  mcp:\n    - name: a\n      transport:\n        type: stdio\n        command: x\n        env:\n          "BAD-NAME": v',
    [['9:11', 'error', "key 'BAD-NAME' in tools.mcp[0].transport.env must be an environment variable name"]],
  ],
  [
    'tool filter not list',
    'tools:\n  mcp:\n    - name: a\n      transport: {type: stdio, command: x}\n      tool_filter:\n        allow: read_file',
    [['7:16', 'error', 'tools.mcp[0].tool_filter.allow must be a list, not the string "read_file"']],
  ],
  [
    'tool filter unknown',
    'tools:\n  mcp:\n    - name: a\n      transport: {type: stdio, command: x}\n      tool_filter:\n        only: [x]',
    [['7:9', 'error', "unknown key 'only' in tools.mcp[0].tool_filter; allowed keys: allow, deny"]],
  ],
  [
    'tool filter notes',
    'tools:\n  mcp:\n    - name: a\n      transport: {type: stdio, command: x}\n      tool_filter:\n        allow: []\n        deny: [rm]',
    [
      ['7:16', 'note', 'allow is empty: no tool of this server is available'],
      ['8:15', 'note', "'rm' is denied but not allowed anyway (deny applies after allow)"],
    ],
  ],
  [
    'tools unknown',
    'tools:\n  openapi: []',
    [['3:3', 'error', "unknown key 'openapi' in tools; allowed keys: mcp"]],
  ],
  [
    'x-amf bad',
    'x-amf:\n  tags: [Bad_Tag]\n  visibility: world\n  flavour: x',
    [
      ['3:10', 'error', 'x-amf.tags[0] must be 1-64 characters of a-z, 0-9 or "-"'],
      ['4:15', 'error', 'x-amf.visibility must be one of local, mesh, public, not the string "world"'],
      [
        '5:3',
        'error',
        "unknown key 'flavour' in x-amf; allowed keys: tags, trust, visibility, tool_alias, mcp",
      ],
    ],
  ],
  ['duplicate key', 'name: a\nname: b', [['3:1', 'error', 'YAML: Map keys must be unique']]],
  ['not a mapping', '- a\n- b', [['2:1', 'error', 'front matter must be a mapping of keys to values']]],
  [
    'spec version note',
    'spec_version: "0.2.0"\nversion: "1.0"',
    [
      ['2:15', 'note', "spec_version '0.2.0' is not 0.3.x; read as AFM 0.3.0"],
      ['3:10', 'note', "version '1.0' is not a semantic version (MAJOR.MINOR.PATCH)"],
    ],
  ],
  [
    'icon url bad',
    'icon_url: "not a url"',
    [['2:11', 'error', "icon_url 'not a url' is not an absolute URL"]],
  ],
];

describe('front-matter problems with line and column', () => {
  it.each(CASES)('%s', (_name, frontMatter, expected) => {
    const result = parseAfm(`---\n${frontMatter}\n---\n${BODY}`, '/t/agent.afm.md', {
      resolve: false,
      env: {},
    });
    const got = result.problems.map((p) => [`${p.line}:${p.column}`, p.severity, p.message]);
    expect(got).toEqual(expected);
    for (const p of result.problems) expect(p.file).toBe('/t/agent.afm.md');
    const hasError = expected.some((e) => e[1] === 'error');
    expect(result.definition === undefined).toBe(hasError);
  });
});

describe('file-level problems', () => {
  const parse = (text: string, file = '/t/agent.afm.md') => parseAfm(text, file, { resolve: false, env: {} });
  const summary = (text: string, file?: string) =>
    parse(text, file).problems.map((p) => `${p.line}:${p.column} ${p.severity} ${p.message}`);

  it('refuses other extensions', () => {
    expect(summary(BODY, '/t/agent.md')).toEqual([
      '1:1 error an AFM file must be named *.afm.md or *.afm (AFM 3)',
    ]);
  });

  it('reports an unclosed front matter and the sections it swallowed', () => {
    expect(summary(`---\nname: x\n${BODY}`)).toEqual([
      "1:1 error front matter opened with '---' on line 1 is never closed by a '---' line",
    ]);
  });

  it('reports YAML syntax errors at their position and still checks the body', () => {
    const problems = summary('---\nname: "open\nmodel: {}\n---\n# Role\n\nr\n');
    expect(problems[0]).toBe('3:10 error YAML: Missing closing "quote');
    expect(problems.at(-1)).toBe(
      "5:1 error missing required '# Instructions' section in the markdown body (AFM 4.3)",
    );
  });

  it('refuses alias bombs', () => {
    const bomb = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let n = 1; n < 10; n += 1)
      bomb.push(
        `a${n}: &a${n} [${Array(10)
          .fill(`*a${n - 1}`)
          .join(', ')}]`,
      );
    const result = parse(`---\n${bomb.join('\n')}\n---\n${BODY}`);
    expect(result.definition).toBeUndefined();
    expect(result.problems.some((p) => p.severity === 'error' && /alias/i.test(p.message))).toBe(true);
  });
});

describe('body sections (AFM 4.3: both required, with content)', () => {
  const summary = (body: string) =>
    parseAfm(`---\nname: s\n---\n${body}`, '/t/s.afm.md', { resolve: false, env: {} }).problems.map(
      (p) => `${p.line}:${p.column} ${p.severity} ${p.message}`,
    );

  it('requires level-1 headings outside code fences, and notes stray text', () => {
    expect(
      summary(
        '\nSome stray text.\n\n## Role\n\nNot level 1.\n\n# Instructions\n\n```md\n# Role\nfenced\n```\n',
      ),
    ).toEqual([
      "4:1 error missing required '# Role' section in the markdown body (AFM 4.3)",
      "5:1 note text before the first '# Role' or '# Instructions' section is not part of the agent and is ignored",
    ]);
  });

  it('refuses empty and duplicate sections, and prefix headings do not count', () => {
    expect(summary('# Role\n\n# Instructions\nDo.\n# Role\nAgain.\n# Roles\n')).toEqual([
      "4:1 error '# Role' section is empty: it must say what the agent is for",
      "8:1 error duplicate '# Role' section (first at line 4)",
    ]);
  });

  it('refuses http variables in the body but leaves shell-style ${X} alone', () => {
    const result = parseAfm(
      `# Role\n\nUse \${HOME} and \${a:-b}.\n\n# Instructions\n\nSay \${http:payload.x}.\n`,
      '/t/b.afm.md',
      { resolve: true, env: {} },
    );
    expect(result.problems.map((p) => `${p.line}:${p.column} ${p.message}`)).toEqual([
      '7:5 ${http:payload.x}: http variables are only allowed in the prompt of a webhook interface',
    ]);
  });
});

describe('bounds', () => {
  it('keeps ajv wording for sizes a hint does not describe', () => {
    const many = Array.from(
      { length: 17 },
      (_, i) => `  - type: webchat\n    exposure: {http: {path: /p${i}}}`,
    ).join('\n');
    const result = parseAfm(`---\ninterfaces:\n${many}\n---\n${BODY}`, '/t/a.afm.md', {
      resolve: false,
      env: {},
    });
    expect(result.problems[0]).toMatchObject({
      line: 3,
      column: 3,
      message: 'interfaces must NOT have more than 16 items',
    });
  });
});

describe('hostile input never crashes the parser', () => {
  it.each([
    ['deep nesting', `x: ${'['.repeat(20000)}${']'.repeat(20000)}`, /YAML: Maximum call stack size exceeded/],
    ['a list key', '? [a]\n: b', /^keys must be plain strings, not lists or mappings$/],
    ['a mapping key', '{a: 1}: x', /^keys must be plain strings, not lists or mappings$/],
    ['control characters', '\u0000\u0001', /front matter must be a mapping/],
    ['a scalar document', '!!binary abc', /front matter must be a mapping/],
  ])('%s', (_name, frontMatter, message) => {
    const result = parseAfm(`---\n${frontMatter}\n---\n${BODY}`, '/t/a.afm.md', { resolve: false, env: {} });
    expect(result.definition).toBeUndefined();
    expect(result.problems.some((p) => p.severity === 'error' && message.test(p.message))).toBe(true);
  });

  it('reads an unknown tag as its plain value, with a note', () => {
    const result = parseAfm(`---\nlicense: !!js/function "MIT"\n---\n${BODY}`, '/t/a.afm.md', {
      resolve: false,
      env: {},
    });
    expect(result.definition?.license).toBe('MIT');
    expect(result.problems.map((p) => `${p.line}:${p.column} ${p.severity}`)).toEqual(['2:10 note']);
  });
});
