/**
 * Turns a front matter that passed every check into the defaulted, frozen AfmDefinition (the defaults
 * are listed in docs/afm.md and in the doc comments of types.ts).
 */
import path from 'node:path';
import { descriptionFromRole } from './bodySections.js';
import { defaultPathFor } from './semanticChecks.js';
import {
  DEFAULT_MAX_ITERATIONS,
  type AfmAuthentication,
  type AfmDefinition,
  type AfmInterface,
  type AfmMcpPrompt,
  type AfmMcpResource,
  type AfmMcpServer,
  type AfmMcpServing,
  type AfmMcpTransport,
  type AfmSignature,
  type AfmSourceMap,
  type AfmSubscription,
  type JsonSchema,
} from './types.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

const STRING_SCHEMA: JsonSchema = { type: 'string' };
const ANY_SCHEMA: JsonSchema = {};

/** `math-tutor` from `/x/math-tutor.afm.md` or `/x/math-tutor.afm`. */
export function nameFromFile(file: string): string {
  return path.basename(file).replace(/\.afm(\.md)?$/i, '') || 'agent';
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** Copies only the defined keys (exactOptionalPropertyTypes-friendly, and no `undefined` in output). */
/** `value` without its undefined members (an optional member is absent, never undefined). */
function defined<T extends Obj>(value: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}

function authentication(value: unknown): AfmAuthentication | undefined {
  if (!isObj(value) || typeof value.type !== 'string') return undefined;
  return { ...value, type: value.type.toLowerCase() } as AfmAuthentication;
}

function signature(value: unknown, type: string): AfmSignature {
  const sig = isObj(value) ? value : {};
  const input = isObj(sig.input) ? (sig.input as JsonSchema) : undefined;
  const output = isObj(sig.output) ? (sig.output as JsonSchema) : undefined;
  return {
    input: input ?? (type === 'webhook' ? ANY_SCHEMA : STRING_SCHEMA),
    output: output ?? STRING_SCHEMA,
    input_declared: input !== undefined,
    output_declared: output !== undefined,
  };
}

function subscription(value: unknown): AfmSubscription | undefined {
  if (!isObj(value)) return undefined;
  return defined({
    protocol: String(value.protocol).toLowerCase(),
    hub: str(value.hub),
    topic: str(value.topic),
    callback: str(value.callback),
    secret: str(value.secret),
    authentication: authentication(value.authentication),
  }) as AfmSubscription;
}

function toInterface(value: Obj): AfmInterface {
  const type = value.type as AfmInterface['type'];
  const sig = signature(value.signature, type);
  if (type === 'consolechat') return { type, signature: sig };
  const http = isObj(value.exposure) && isObj(value.exposure.http) ? value.exposure.http : {};
  const exposure = { http: { path: str(http.path) ?? (defaultPathFor(type) as string) } };
  if (type === 'webchat') return { type, signature: sig, exposure };
  const sub = subscription(value.subscription);
  return defined({
    type,
    prompt: str(value.prompt),
    signature: sig,
    exposure,
    subscription: sub,
  }) as AfmInterface;
}

function toTransport(value: Obj): AfmMcpTransport {
  if (value.type === 'stdio') {
    return {
      type: 'stdio',
      command: String(value.command),
      args: Array.isArray(value.args) ? value.args.map(String) : [],
      env: isObj(value.env)
        ? (Object.fromEntries(Object.entries(value.env).map(([k, v]) => [k, String(v)])) as Record<
            string,
            string
          >)
        : {},
    };
  }
  return defined({
    type: 'http',
    url: String(value.url),
    authentication: authentication(value.authentication),
  }) as AfmMcpTransport;
}

function toMcpServer(value: Obj): AfmMcpServer {
  const filter = isObj(value.tool_filter) ? value.tool_filter : undefined;
  return defined({
    name: String(value.name),
    transport: toTransport(value.transport as Obj),
    tool_filter: filter
      ? defined({
          allow: Array.isArray(filter.allow) ? filter.allow.map(String) : undefined,
          deny: Array.isArray(filter.deny) ? filter.deny.map(String) : undefined,
        })
      : undefined,
  }) as AfmMcpServer;
}

const MIME_BY_EXTENSION: Record<string, string> = {
  '.md': 'text/markdown',
  '.json': 'application/json',
  '.yaml': 'application/yaml',
  '.yml': 'application/yaml',
  '.html': 'text/html',
  '.csv': 'text/csv',
};

function toServedResource(value: Obj): AfmMcpResource {
  const file = str(value.file);
  const mimeType =
    str(value.mimeType) ??
    (file ? MIME_BY_EXTENSION[path.extname(file).toLowerCase()] : undefined) ??
    'text/plain';
  return defined({
    uri: String(value.uri),
    name: String(value.name),
    description: str(value.description),
    mimeType,
    text: str(value.text),
    file,
  }) as AfmMcpResource;
}

function toServedPrompt(value: Obj): AfmMcpPrompt {
  const args = Array.isArray(value.arguments) ? value.arguments.filter(isObj) : [];
  return defined({
    name: String(value.name),
    description: str(value.description),
    arguments: args.map((a) =>
      defined({ name: String(a.name), description: str(a.description), required: a.required === true }),
    ),
    template: String(value.template),
  }) as AfmMcpPrompt;
}

function toServing(value: unknown): AfmMcpServing {
  const mcp = isObj(value) ? value : {};
  return {
    resources: Array.isArray(mcp.resources) ? mcp.resources.filter(isObj).map(toServedResource) : [],
    prompts: Array.isArray(mcp.prompts) ? mcp.prompts.filter(isObj).map(toServedPrompt) : [],
    reexport_servers: mcp.reexport_servers === true,
  };
}

/** Inputs of buildDefinition: checked front matter, the two body sections, and the source map. */
export interface DefinitionParts {
  readonly front: Obj;
  readonly role: string;
  readonly instructions: string;
  readonly source: AfmSourceMap;
}

/** Builds the frozen definition with every default filled in. */
export function buildDefinition({ front, role, instructions, source }: DefinitionParts): AfmDefinition {
  const authors = Array.isArray(front.authors)
    ? front.authors.map(String)
    : typeof front.author === 'string'
      ? [front.author]
      : [];
  const interfaces = Array.isArray(front.interfaces)
    ? front.interfaces.filter(isObj).map(toInterface)
    : [{ type: 'consolechat' as const, signature: signature(undefined, 'consolechat') }];
  const tools =
    isObj(front.tools) && Array.isArray(front.tools.mcp)
      ? front.tools.mcp.filter(isObj).map(toMcpServer)
      : [];
  const model = isObj(front.model) ? front.model : {};
  const mesh = isObj(front['x-amf']) ? front['x-amf'] : {};
  const provider = isObj(front.provider)
    ? defined({ name: str(front.provider.name), url: str(front.provider.url) })
    : undefined;

  const definition: AfmDefinition = {
    ...defined({
      spec_version: str(front.spec_version),
      provider,
      icon_url: str(front.icon_url),
      license: str(front.license),
    }),
    name: str(front.name) ?? nameFromFile(source.path),
    description: str(front.description) ?? descriptionFromRole(role),
    version: str(front.version) ?? '0.0.0',
    authors,
    model: defined({
      name: str(model.name),
      provider: str(model.provider)?.toLowerCase(),
      url: str(model.url),
      authentication: authentication(model.authentication),
    }),
    interfaces,
    tools: { mcp: tools },
    max_iterations: typeof front.max_iterations === 'number' ? front.max_iterations : DEFAULT_MAX_ITERATIONS,
    role,
    instructions,
    'x-amf': {
      ...defined({ tool_alias: str(mesh.tool_alias) }),
      tags: Array.isArray(mesh.tags) ? mesh.tags.map(String) : [],
      trust: str(mesh.trust) ?? 'local',
      visibility: (str(mesh.visibility) ?? 'local') as AfmDefinition['x-amf']['visibility'],
      mcp: toServing(mesh.mcp),
    },
    source,
  };
  return deepFreeze(definition);
}
