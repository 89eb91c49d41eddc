/**
 * Rules the JSON Schema cannot say: one interface per type, unique MCP server names, HTTP paths that
 * do not collide (with each other or with the worker's own endpoints), authentication fields per
 * type, URLs, signature schemas that compile, webhook templates that compile, WebSub subscriptions,
 * and notes for things that are allowed but probably not meant. Runs on the front matter as plain
 * data; every check guards its own types because the schema check may have failed elsewhere.
 */
import { signatureSchemaProblem } from './schemaCheck.js';
import { checkServedMcp } from './servedMcpChecks.js';
import { scanWebhookTemplate } from './webhookTemplate.js';
import { toPointer } from './yamlLocator.js';

/**
 * Reports a problem at a pointer; `atKey` points at the key instead of the value, `needle` at the
 * first place that text appears inside the value (a variable in a long prompt).
 */
export type Report = (
  pointer: string,
  severity: 'error' | 'note',
  message: string,
  where?: { atKey?: boolean; needle?: string },
) => void;

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const hasVariable = (v: string): boolean => v.includes('${');

/** Paths the worker serves on the same port as the AFM interfaces. */
const RESERVED_PATHS = ['/a2a', '/mcp', '/health', '/tasks/send', '/.well-known'];

/** Fields each supported authentication type needs (all strings); other fields are typos. */
const AUTH_FIELDS: Record<string, { required: readonly string[]; optional: readonly string[] }> = {
  bearer: { required: ['token'], optional: [] },
  basic: { required: ['username', 'password'], optional: [] },
  'api-key': { required: ['api_key'], optional: ['header'] },
};

/** Default HTTP path of an interface type. */
export function defaultPathFor(type: string): string | undefined {
  if (type === 'webchat') return '/chat';
  if (type === 'webhook') return '/webhook';
  return undefined;
}

function checkAuthentication(auth: unknown, at: string, report: Report): void {
  if (!isObj(auth) || typeof auth.type !== 'string') return;
  const type = auth.type.toLowerCase();
  const fields = AUTH_FIELDS[type];
  if (!fields) {
    report(
      `${at}/type`,
      'error',
      `authentication type '${auth.type}' is not supported by AMF: use bearer (token), basic (username, password) or api-key (api_key)`,
    );
    return;
  }
  for (const field of fields.required) {
    const value = auth[field];
    if (value === undefined) report(at, 'error', `${type} authentication needs '${field}'`);
    else if (typeof value !== 'string' || value === '')
      report(`${at}/${field}`, 'error', `'${field}' must be a non-empty string`);
  }
  for (const key of Object.keys(auth)) {
    if (key === 'type' || fields.required.includes(key)) continue;
    if (!fields.optional.includes(key)) {
      const allowed = ['type', ...fields.required, ...fields.optional].join(', ');
      report(
        `${at}/${key}`,
        'error',
        `unknown key '${key}' in ${type} authentication; allowed keys: ${allowed}`,
        {
          atKey: true,
        },
      );
    } else if (typeof auth[key] !== 'string') report(`${at}/${key}`, 'error', `'${key}' must be a string`);
  }
}

function checkUrl(value: unknown, at: string, what: string, report: Report): void {
  if (typeof value !== 'string' || hasVariable(value)) return;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    report(at, 'error', `${what} '${value}' is not an absolute URL`);
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    report(at, 'error', `${what} '${value}' must be an http or https URL`);
  }
}

function checkSignature(signature: unknown, at: string, report: Report): void {
  if (!isObj(signature)) return;
  for (const side of ['input', 'output'] as const) {
    const schema = signature[side];
    if (!isObj(schema)) continue;
    const problem = signatureSchemaProblem(schema);
    if (problem) {
      const where = problem.pointer ? `${at}/${side}${problem.pointer}` : `${at}/${side}`;
      report(where, 'error', `signature.${side} is not a valid JSON Schema: ${problem.message}`);
    }
  }
}

function checkSubscription(sub: unknown, at: string, report: Report): void {
  if (!isObj(sub)) return;
  if (typeof sub.protocol === 'string' && sub.protocol.toLowerCase() !== 'websub') {
    report(
      `${at}/protocol`,
      'error',
      `subscription protocol '${sub.protocol}' is not supported: AMF supports websub`,
    );
  }
  if ((sub.hub === undefined) !== (sub.topic === undefined)) {
    report(
      at,
      'error',
      'subscription needs both hub and topic to subscribe (or neither, when registered by hand)',
    );
  }
  checkUrl(sub.hub, `${at}/hub`, 'subscription hub', report);
  checkUrl(sub.callback, `${at}/callback`, 'subscription callback', report);
  if (typeof sub.topic === 'string' && !hasVariable(sub.topic) && !URL.canParse(sub.topic)) {
    report(`${at}/topic`, 'error', `subscription topic '${sub.topic}' is not a URL`);
  }
  checkAuthentication(sub.authentication, `${at}/authentication`, report);
}

function checkInterfaces(interfaces: unknown, report: Report): void {
  if (!Array.isArray(interfaces)) return;
  const firstOfType = new Map<string, number>();
  const pathOwner = new Map<string, number>();
  interfaces.forEach((iface: unknown, i) => {
    if (!isObj(iface) || typeof iface.type !== 'string') return;
    const at = toPointer(['interfaces', i]);
    const first = firstOfType.get(iface.type);
    if (first !== undefined) {
      report(
        `${at}/type`,
        'error',
        `a second '${iface.type}' interface (the first is interfaces[${first}]): one interface per type`,
      );
    } else firstOfType.set(iface.type, i);

    checkSignature(iface.signature, `${at}/signature`, report);
    const http = isObj(iface.exposure) && isObj(iface.exposure.http) ? iface.exposure.http : undefined;
    const path = typeof http?.path === 'string' ? http.path : defaultPathFor(iface.type);
    if (path) {
      const pathAt = http?.path !== undefined ? `${at}/exposure/http/path` : `${at}/type`;
      const reserved = RESERVED_PATHS.find((r) => path === r || path.startsWith(`${r}/`));
      if (reserved)
        report(
          pathAt,
          'error',
          `path '${path}' is served by the AMF worker itself (${reserved}); choose another`,
        );
      const owner = pathOwner.get(path);
      if (owner !== undefined)
        report(pathAt, 'error', `path '${path}' is already used by interfaces[${owner}]`);
      else pathOwner.set(path, i);
    }
    if (iface.type === 'webhook') {
      if (typeof iface.prompt === 'string') {
        for (const p of scanWebhookTemplate(iface.prompt).problems) {
          report(`${at}/prompt`, 'error', p.message, { needle: p.variable });
        }
      }
      checkSubscription(iface.subscription, `${at}/subscription`, report);
    }
  });
}

function checkMcpServers(servers: unknown, report: Report): void {
  if (!Array.isArray(servers)) return;
  const firstByName = new Map<string, number>();
  servers.forEach((server: unknown, i) => {
    if (!isObj(server)) return;
    const at = toPointer(['tools', 'mcp', i]);
    if (typeof server.name === 'string') {
      const first = firstByName.get(server.name);
      if (first !== undefined) {
        report(
          `${at}/name`,
          'error',
          `MCP server name '${server.name}' is already used by tools.mcp[${first}]; names must be unique`,
        );
      } else firstByName.set(server.name, i);
    }
    const transport = server.transport;
    if (isObj(transport) && transport.type === 'http') {
      checkUrl(transport.url, `${at}/transport/url`, 'MCP server url', report);
      checkAuthentication(transport.authentication, `${at}/transport/authentication`, report);
    }
    const filter = server.tool_filter;
    if (isObj(filter) && Array.isArray(filter.allow)) {
      if (filter.allow.length === 0)
        report(`${at}/tool_filter/allow`, 'note', 'allow is empty: no tool of this server is available');
      const deny = Array.isArray(filter.deny) ? filter.deny : [];
      for (const name of deny) {
        if (!filter.allow.includes(name)) {
          report(
            `${at}/tool_filter/deny`,
            'note',
            `'${String(name)}' is denied but not allowed anyway (deny applies after allow)`,
          );
        }
      }
    }
  });
}

/** Runs every cross-field rule on the front matter. */
export function checkSemantics(front: Obj, report: Report): void {
  checkInterfaces(front.interfaces, report);
  if (isObj(front.tools)) checkMcpServers(front.tools.mcp, report);
  checkServedMcp(front, report);
  if (isObj(front.model)) {
    checkUrl(front.model.url, '/model/url', 'model url', report);
    checkAuthentication(front.model.authentication, '/model/authentication', report);
  }
  if (isObj(front.provider)) checkUrl(front.provider.url, '/provider/url', 'provider url', report);
  checkUrl(front.icon_url, '/icon_url', 'icon_url', report);
  if (typeof front.spec_version === 'string' && !/^0\.3(\.\d+)?$/.test(front.spec_version)) {
    report('/spec_version', 'note', `spec_version '${front.spec_version}' is not 0.3.x; read as AFM 0.3.0`);
  }
  if (typeof front.version === 'string' && !/^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$/.test(front.version)) {
    report('/version', 'note', `version '${front.version}' is not a semantic version (MAJOR.MINOR.PATCH)`);
  }
  if (front.author !== undefined && front.authors !== undefined) {
    report('/author', 'note', "both 'author' and 'authors' are given: 'authors' takes precedence", {
      atKey: true,
    });
  }
  for (const key of Object.keys(front)) {
    if (key.startsWith('x-') && key !== 'x-amf')
      report(toPointer([key]), 'note', `extension key '${key}' is ignored`, { atKey: true });
  }
}
