// Configuration loading: layer precedence, error messages that name their key, frozen result.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  DEFAULT_CONFIG,
  loadConfig,
  type AmfConfig,
  type ConfigOverrides,
} from '../../src/config/config.js';

let home: string;

beforeEach(async () => {
  home = await mkdtemp(path.join(tmpdir(), 'amf-config-'));
});

afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

/** Writes amf.yaml into `<home>/data` and returns its path. */
async function writeYaml(text: string, dir = path.join(home, 'data')): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, 'amf.yaml');
  await writeFile(file, text);
  return file;
}

/** The problems of a load that must fail. */
async function problemsOf(load: Promise<AmfConfig>): Promise<string[]> {
  const err = await load.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  const configError = err as ConfigError;
  expect(configError.code).toBe('CONFIG_INVALID');
  return configError.problems;
}

describe('defaults', () => {
  it('returns the built-in defaults when there is no file, env or flag', async () => {
    const config = await loadConfig({ env: { HOME: home } });
    expect(config).toEqual({ ...DEFAULT_CONFIG, dataDir: path.join(home, '.amf') });
    expect(config.coordinator).toEqual({
      host: '127.0.0.1',
      port: 8765,
      apiKey: null,
      url: 'http://127.0.0.1:8765',
    });
    expect(config.nats.url).toBeNull();
    expect(config.tasks.ttlSeconds).toBe(30);
    expect(config.worker.handler).toBe('echo');
    expect(config.mcp.servers).toEqual([]);
  });

  it('exposes frozen defaults with an expanded data dir', () => {
    expect(path.isAbsolute(DEFAULT_CONFIG.dataDir)).toBe(true);
    expect(Object.isFrozen(DEFAULT_CONFIG.tasks)).toBe(true);
  });
});

describe('file', () => {
  it('reads <data-dir>/amf.yaml from the default data dir (~/.amf)', async () => {
    await writeYaml('log_level: debug\n', path.join(home, '.amf'));
    const config = await loadConfig({ env: { HOME: home } });
    expect(config.logLevel).toBe('debug');
  });

  it('looks the file up in the data dir chosen by AMF_DATA_DIR or --data-dir', async () => {
    await writeYaml('tasks:\n  ttl_seconds: 7\n');
    const fromEnv = await loadConfig({ env: { HOME: home, AMF_DATA_DIR: path.join(home, 'data') } });
    expect(fromEnv.tasks.ttlSeconds).toBe(7);
    expect(fromEnv.dataDir).toBe(path.join(home, 'data'));
    const fromFlag = await loadConfig({ env: { HOME: home }, flags: { dataDir: '~/data' } });
    expect(fromFlag.tasks.ttlSeconds).toBe(7);
    expect(fromFlag.dataDir).toBe(path.join(home, 'data'));
  });

  it('reads an explicit --config file, merges sections and keeps unspecified defaults', async () => {
    const file = await writeYaml(
      [
        'data_dir: ~/elsewhere',
        'coordinator:',
        '  port: 9100',
        'nats:',
        '  url: nats://10.0.0.1:4222,nats://10.0.0.2:4222',
        'policy:',
        '  path: ./policies',
        'worker:',
        '  tags: [summarize, translate]',
        '  handler: ./handler.js',
        'watcher:',
        '  integrity_warn: false',
      ].join('\n'),
      path.join(home, 'conf'),
    );
    const config = await loadConfig({ configPath: file, env: { HOME: home } });
    expect(config.dataDir).toBe(path.join(home, 'elsewhere'));
    expect(config.coordinator.port).toBe(9100);
    expect(config.coordinator.host).toBe('127.0.0.1');
    expect(config.coordinator.url).toBe('http://127.0.0.1:9100');
    expect(config.nats.url).toBe('nats://10.0.0.1:4222,nats://10.0.0.2:4222');
    expect(config.nats.port).toBe(4222);
    // Relative paths in a file are relative to the file.
    expect(config.policy.path).toBe(path.join(home, 'conf', 'policies'));
    expect(config.worker.handler).toBe(path.join(home, 'conf', 'handler.js'));
    expect(config.worker.tags).toEqual(['summarize', 'translate']);
    expect(config.watcher.integrityWarn).toBe(false);
  });

  it('accepts an empty file', async () => {
    const file = await writeYaml('# nothing here yet\n');
    const config = await loadConfig({ configPath: file, env: { HOME: home } });
    expect(config.coordinator.port).toBe(8765);
  });

  it('fails when an explicit --config file does not exist, naming it', async () => {
    const missing = path.join(home, 'nope.yaml');
    const problems = await problemsOf(loadConfig({ configPath: missing, env: { HOME: home } }));
    expect(problems).toEqual([`${missing}: cannot read config file (no such file)`]);
  });
});

describe('precedence: defaults < file < env < flags', () => {
  it('lets each layer override the one below', async () => {
    const file = await writeYaml('coordinator:\n  port: 1001\n  host: 0.0.0.0\nlog_level: warn\n');
    const env = { HOME: home, AMF_PORT: '1002' };

    const fileOnly = await loadConfig({ configPath: file, env: { HOME: home } });
    expect(fileOnly.coordinator.port).toBe(1001);

    const withEnv = await loadConfig({ configPath: file, env });
    expect(withEnv.coordinator.port).toBe(1002);
    expect(withEnv.logLevel).toBe('warn');
    // A wildcard bind address is reached locally.
    expect(withEnv.coordinator.url).toBe('http://127.0.0.1:1002');

    const withFlags = await loadConfig({ configPath: file, env, flags: { coordinator: { port: 1003 } } });
    expect(withFlags.coordinator.port).toBe(1003);
    expect(withFlags.coordinator.host).toBe('0.0.0.0');
    expect(withFlags.coordinator.url).toBe('http://127.0.0.1:1003');
  });

  it('keeps an explicitly set coordinator url instead of deriving it', async () => {
    const file = await writeYaml('coordinator:\n  url: http://mesh.example:9999\n');
    const config = await loadConfig({ configPath: file, env: { HOME: home, AMF_PORT: '1002' } });
    expect(config.coordinator.url).toBe('http://mesh.example:9999');
    const fromEnv = await loadConfig({
      configPath: file,
      env: { HOME: home, AMF_COORDINATOR_URL: 'http://10.1.1.1:8765' },
    });
    expect(fromEnv.coordinator.url).toBe('http://10.1.1.1:8765');
  });

  it('maps every contract environment variable', async () => {
    const config = await loadConfig({
      env: {
        HOME: home,
        AMF_DATA_DIR: path.join(home, 'd'),
        AMF_PORT: '0',
        AMF_API_KEY: 'k-123',
        AMF_COORDINATOR_URL: 'https://coord.example',
        AMF_NATS_URL: 'nats://127.0.0.1:4333',
        AMF_NATS_SERVER_BIN: '/opt/nats/nats-server',
        AMF_MDNS_INTERFACE: '192.168.1.5',
        AMF_IDENTITY_MODE: 'spiffe',
        AMF_MCP_REQUIRE_TLS: 'true',
        AMF_MCP_BARE_NAMES: 'true',
        AMF_WATCHER_INTEGRITY_WARN: 'false',
        AMF_LOG_LEVEL: 'error',
      },
    });
    expect(config.dataDir).toBe(path.join(home, 'd'));
    expect(config.coordinator).toEqual({
      host: '127.0.0.1',
      port: 0,
      apiKey: 'k-123',
      url: 'https://coord.example',
    });
    expect(config.nats.url).toBe('nats://127.0.0.1:4333');
    expect(config.nats.serverBinary).toBe('/opt/nats/nats-server');
    expect(config.mdns.interface).toBe('192.168.1.5');
    expect(config.identity.mode).toBe('spiffe');
    expect(config.mcp.requireTls).toBe(true);
    expect(config.mcp.bareNames).toBe(true);
    expect(config.mcp.reexportServers).toBe(false);
    expect(config.watcher.integrityWarn).toBe(false);
    expect(config.logLevel).toBe('error');
  });

  it('treats empty environment variables as unset', async () => {
    const config = await loadConfig({ env: { HOME: home, AMF_PORT: '', AMF_NATS_URL: '  ' } });
    expect(config.coordinator.port).toBe(8765);
    expect(config.nats.url).toBeNull();
  });

  it('coerces string flag values as an argument parser delivers them, and ignores undefined ones', async () => {
    const config = await loadConfig({
      env: { HOME: home },
      flags: {
        coordinator: { port: '9001', host: undefined },
        worker: { tags: 'a, b', port: '0' },
        mdns: { enabled: false },
        nats: { url: undefined },
      },
    });
    expect(config.coordinator.port).toBe(9001);
    expect(config.coordinator.host).toBe('127.0.0.1');
    expect(config.worker.tags).toEqual(['a', 'b']);
    expect(config.worker.port).toBe(0);
    expect(config.mdns.enabled).toBe(false);
  });

  it('replaces lists rather than concatenating them', async () => {
    const file = await writeYaml('worker:\n  tags: [x, y]\n');
    const config = await loadConfig({
      configPath: file,
      env: { HOME: home },
      flags: { worker: { tags: ['z'] } },
    });
    expect(config.worker.tags).toEqual(['z']);
  });
});

describe('errors name their key and say what was expected', () => {
  it('reports a bad file value with its key, the expectation, the value and the line', async () => {
    const file = await writeYaml('coordinator:\n  port: abc\n');
    const problems = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problems).toEqual([
      `${file}: coordinator.port: must be an integer between 0 and 65535 (got "abc") at line 2, column 9`,
    ]);
  });

  it('suggests the nearest key for an unknown one', async () => {
    const file = await writeYaml(
      'tasks:\n  ttl_secs: 3\ncoordinater:\n  port: 1\nnats:\n  maxPayloadBytes: 5\n',
    );
    const problems = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problems).toContain(
      `${file}: tasks.ttl_secs: unknown key (did you mean ttl_seconds?) at line 2, column 3`,
    );
    expect(problems).toContain(
      `${file}: coordinater: unknown key (did you mean coordinator?) at line 3, column 1`,
    );
    expect(problems).toContain(
      `${file}: nats.maxPayloadBytes: unknown key (did you mean max_payload_bytes?) at line 6, column 3`,
    );
  });

  it('lists the known keys when nothing is close', async () => {
    const file = await writeYaml('heartbeat:\n  zzzzzzzz: 1\n');
    const [problem] = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problem).toContain(
      'heartbeat.zzzzzzzz: unknown key (expected one of: interval_seconds, offline_after_missed)',
    );
  });

  it('names the key of every kind of bad value, all in one pass', async () => {
    const cases: Array<[string, string, string]> = [
      ['log_level: loud', 'log_level', 'must be one of "trace", "debug", "info", "warn", "error", "silent"'],
      ['data_dir: ""', 'data_dir', 'must be a directory path'],
      ['coordinator:\n  url: ftp://x', 'coordinator.url', 'must be an http:// or https:// URL'],
      ['nats:\n  url: "nats://a b"', 'nats.url', 'must be a NATS URL'],
      ['nats:\n  max_payload_bytes: 10', 'nats.max_payload_bytes', 'between 1024 and 67108864'],
      ['mdns:\n  enabled: yes', 'mdns.enabled', 'must be true or false (got "yes"; YAML 1.2 reads'],
      ['mdns:\n  interface: eth0', 'mdns.interface', 'must be an IP address'],
      ['policy:\n  opa_url: localhost:8181', 'policy.opa_url', 'must be an http:// or https:// URL, or null'],
      ['identity:\n  mode: kerberos', 'identity.mode', 'must be one of "static", "spiffe", or null'],
      ['tasks:\n  ttl_seconds: 0', 'tasks.ttl_seconds', 'greater than 0'],
      ['tasks:\n  max_retries: 1.5', 'tasks.max_retries', 'must be an integer between 0 and 100'],
      ['heartbeat:\n  offline_after_missed: "3"', 'heartbeat.offline_after_missed', '(got "3")'],
      ['openai:\n  max_body_bytes: -1', 'openai.max_body_bytes', 'must be a whole number of bytes'],
      ['worker:\n  tags: [a.b]', 'worker.tags[0]', 'must be a tag of 1-64 characters'],
      ['worker:\n  tags: [a, a]', 'worker.tags', '("a" appears twice)'],
      ['worker:\n  concurrency: 0', 'worker.concurrency', 'between 1 and 4096'],
      ['watcher: true', 'watcher', 'must be a mapping (watcher settings)'],
      ['mcp:\n  servers: {}', 'mcp.servers', 'must be a list of MCP server entries'],
      ['a2a:\n  agents: [{name: x}]', 'a2a.agents[0].url', 'is required'],
    ];
    for (const [yaml, key, expected] of cases) {
      const file = await writeYaml(yaml);
      const problems = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
      expect(problems, yaml).toHaveLength(1);
      expect(problems[0], yaml).toContain(`${file}: ${key}: `);
      expect(problems[0], yaml).toContain(expected);
    }
  });

  it('reports every problem of every layer at once, file first', async () => {
    const file = await writeYaml('coordinator:\n  port: abc\n  hots: x\n');
    const problems = await problemsOf(
      loadConfig({
        configPath: file,
        env: { HOME: home, AMF_PORT: 'abc', AMF_IDENTITY_MODE: 'x509' },
        flags: { nats: { port: 70000 }, worker: { concurrency: 'many' } },
      }),
    );
    expect(problems).toEqual([
      `${file}: coordinator.port: must be an integer between 0 and 65535 (got "abc") at line 2, column 9`,
      `${file}: coordinator.hots: unknown key (did you mean host?) at line 3, column 3`,
      'AMF_PORT: must be an integer between 0 and 65535 (got "abc")',
      'AMF_IDENTITY_MODE: must be one of "static", "spiffe", or null (got "x509")',
      '--nats-port: must be an integer between 0 and 65535 (got 70000)',
      'option worker.concurrency: must be an integer between 1 and 4096 (got "many")',
    ]);
  });

  it('validates environment values like file values', async () => {
    const problems = await problemsOf(
      loadConfig({
        env: { HOME: home, AMF_WATCHER_INTEGRITY_WARN: 'sometimes', AMF_NATS_URL: 'http://x y' },
      }),
    );
    expect(problems).toEqual([
      'AMF_NATS_URL: must be a NATS URL such as nats://127.0.0.1:4222 (comma-separated for a cluster), or null (got "http://x y")',
      'AMF_WATCHER_INTEGRITY_WARN: must be true or false (got "sometimes")',
    ]);
  });

  it('reports unknown flag keys with a suggestion', async () => {
    const flags = { coordinator: { prot: 1 } } as unknown as ConfigOverrides;
    const problems = await problemsOf(loadConfig({ env: { HOME: home }, flags }));
    expect(problems).toEqual(['option coordinator.prot: unknown key (did you mean port?)']);
  });

  it('never echoes a secret value', async () => {
    const file = await writeYaml('coordinator:\n  api_key: [super-secret-value]\n');
    const [problem] = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problem).toContain('coordinator.api_key: must be a non-empty string, or null');
    expect(problem).not.toContain('super-secret-value');
  });

  it('reports YAML syntax errors with line and column', async () => {
    const file = await writeYaml('coordinator:\n  port: [1, 2\nlog_level: info\n');
    const problems = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problems.length).toBeGreaterThan(0);
    expect(problems[0]).toMatch(
      new RegExp(`^${escape(file)}: YAML syntax error at line \\d+, column \\d+: `),
    );
  });

  it('rejects duplicate keys with their line', async () => {
    const file = await writeYaml('log_level: info\nlog_level: debug\n');
    const problems = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problems[0]).toMatch(/YAML syntax error at line 2, column 1: .*unique/i);
  });

  it('rejects a file whose top level is not a mapping', async () => {
    const file = await writeYaml('- a\n- b\n');
    const problems = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problems).toEqual([
      `${file}: must be a mapping of configuration sections (got ["a","b"]) at line 1, column 1`,
    ]);
  });
});

describe('mcp servers', () => {
  it('accepts http and stdio servers and fills their defaults', async () => {
    const file = await writeYaml(
      [
        'mcp:',
        '  require_tls: true',
        '  servers:',
        '    - name: files',
        '      transport: stdio',
        '      command: npx',
        '      args: [-y, "@modelcontextprotocol/server-filesystem", /tmp]',
        '      env: [HOME, PATH]',
        '      tools: { deny: [write_file] }',
        '    - name: search_1',
        '      transport: http',
        '      url: https://mcp.example/mcp',
        '      timeout_seconds: 5',
        '      tools: { allow: [search] }',
      ].join('\n'),
    );
    const config = await loadConfig({ configPath: file, env: { HOME: home } });
    expect(config.mcp.requireTls).toBe(true);
    expect(config.mcp.servers).toEqual([
      {
        name: 'files',
        transport: 'stdio',
        command: 'npx',
        args: ['-y', '@modelcontextprotocol/server-filesystem', '/tmp'],
        env: ['HOME', 'PATH'],
        timeoutSeconds: 30,
        tools: { allow: null, deny: ['write_file'] },
      },
      {
        name: 'search_1',
        transport: 'http',
        url: 'https://mcp.example/mcp',
        timeoutSeconds: 5,
        tools: { allow: ['search'], deny: [] },
      },
    ]);
  });

  it("requires url for http and command for stdio, and rejects the other transport's fields", async () => {
    const file = await writeYaml(
      [
        'mcp:',
        '  servers:',
        '    - name: a',
        '      transport: http',
        '    - name: b',
        '      transport: stdio',
        '    - name: c',
        '      transport: stdio',
        '      command: run-c',
        '      url: http://127.0.0.1:1/mcp',
        '    - name: d',
        '      transport: http',
        '      url: http://127.0.0.1:1/mcp',
        '      command: run-d',
      ].join('\n'),
    );
    const problems = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problems).toEqual([
      `${file}: mcp.servers[0].url: is required when transport is "http" at line 3, column 7`,
      `${file}: mcp.servers[1].command: is required when transport is "stdio" at line 5, column 7`,
      `${file}: mcp.servers[2].url: only applies when transport is "http" (this server's transport is "stdio") at line 10, column 7`,
      `${file}: mcp.servers[3].command: only applies when transport is "stdio" (this server's transport is "http") at line 14, column 7`,
    ]);
  });

  it('validates names, transports, urls, env names, unknown keys and duplicates', async () => {
    const file = await writeYaml(
      [
        'mcp:',
        '  servers:',
        '    - name: Bad Name',
        '      transport: http',
        '      url: https://x.example',
        '    - name: ws',
        '      transport: websocket',
        '    - name: f',
        '      transport: http',
        '      url: file:///etc/passwd',
        '    - name: s',
        '      transport: stdio',
        '      command: x',
        '      env: [NOT-A-NAME]',
        '      timeout: 5',
        '    - name: s',
        '      transport: stdio',
        '      command: y',
      ].join('\n'),
    );
    const problems = await problemsOf(loadConfig({ configPath: file, env: { HOME: home } }));
    expect(problems).toEqual([
      `${file}: mcp.servers[0].name: must be a server name of 1-64 characters from a-z, 0-9, "_" and "-" (got "Bad Name") at line 3, column 13`,
      `${file}: mcp.servers[1].transport: must be one of "http", "stdio" (got "websocket") at line 7, column 18`,
      `${file}: mcp.servers[2].url: must be an http:// or https:// URL (got "file:///etc/passwd") at line 10, column 12`,
      `${file}: mcp.servers[3].env[0]: must be an environment variable name (letters, digits, "_") (got "NOT-A-NAME") at line 14, column 13`,
      `${file}: mcp.servers[3].timeout: unknown key (did you mean timeout_seconds?) at line 15, column 7`,
      `${file}: mcp.servers[4].name: duplicate name "s" (already used by mcp.servers[3]) at line 16, column 13`,
    ]);
  });
});

describe('result', () => {
  it('is deeply frozen', async () => {
    const file = await writeYaml(
      'mcp:\n  servers:\n    - { name: a, transport: http, url: "http://127.0.0.1:1/mcp" }\n',
    );
    const config = await loadConfig({ configPath: file, env: { HOME: home } });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.coordinator)).toBe(true);
    expect(Object.isFrozen(config.worker.tags)).toBe(true);
    expect(Object.isFrozen(config.mcp.servers[0])).toBe(true);
    expect(Object.isFrozen(config.mcp.servers[0]?.tools.deny)).toBe(true);
    expect(() => {
      (config.coordinator as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => (config.worker.tags as string[]).push('x')).toThrow(TypeError);
  });

  it('does not share state between loads', async () => {
    const a = await loadConfig({ env: { HOME: home }, flags: { worker: { tags: ['one'] } } });
    const b = await loadConfig({ env: { HOME: home } });
    expect(a.worker.tags).toEqual(['one']);
    expect(b.worker.tags).toEqual([]);
    expect(DEFAULT_CONFIG.worker.tags).toEqual([]);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
