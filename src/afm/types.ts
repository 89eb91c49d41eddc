/**
 * The parsed, defaulted and validated AFM (Agent-Flavored Markdown v0.3.0) definition. Field names
 * keep the spec's snake_case so the YAML front matter maps 1:1 onto these types. Every value here has
 * passed validation: defaults are filled in (see docs/afm.md "Defaults"), `author` is folded into
 * `authors`, and static variables (`${env:…}`, `${file:…}`, `${secret:…}`) are already substituted
 * when the definition came from `loadAfmFile` (not when it came from `validateAfmFile`, which never
 * reads secrets). Webhook prompt templates stay as text: compile them with `compileWebhookTemplate`.
 */
import type { Visibility } from '../events/eventTypes.js';

/** A JSON Schema (draft-07, as ajv's default `Ajv` compiles it) written in YAML: always a mapping. */
export type JsonSchema = { readonly [keyword: string]: unknown };

/** 1-based line and column of a value in the AFM file. */
export interface AfmPosition {
  readonly line: number;
  readonly column: number;
}

/**
 * Where each front-matter value sits in the file, keyed by JSON Pointer (`/model/name`,
 * `/interfaces/0/prompt`, `/tools/mcp/1/transport/url`; `''` is the whole front matter). Runtimes use
 * it to point at the line a runtime failure came from (for example an MCP server URL that refuses).
 */
export interface AfmSourceMap {
  /** Absolute path of the AFM file. */
  readonly path: string;
  /** Position of a front-matter value by JSON Pointer; `undefined` for values that were defaulted. */
  position(pointer: string): AfmPosition | undefined;
  /** Line of the `# Role` heading, when present. */
  readonly role_line?: number;
  /** Line of the `# Instructions` heading, when present. */
  readonly instructions_line?: number;
}

/**
 * A client authentication object (spec 5.6). `type` is required and lower-cased; the known types have
 * their fields checked: `bearer` → `token`, `basic` → `username` + `password`, `api-key` → `api_key`
 * (optional `header`, default `Authorization`). Other types (jwt, oauth2, …) keep their fields as given.
 */
export interface AfmAuthentication {
  readonly type: string;
  readonly token?: string;
  readonly username?: string;
  readonly password?: string;
  readonly api_key?: string;
  /** api-key only: the header to carry the key in (an AMF extension; default `Authorization`). */
  readonly header?: string;
  readonly [field: string]: unknown;
}

/** Publisher of the agent (spec 5.1 Provider Object). */
export interface AfmProvider {
  readonly name?: string;
  readonly url?: string;
}

/** The model powering the agent (spec 5.2); every field optional, the runtime picks defaults. */
export interface AfmModel {
  /** Model identifier, e.g. `gpt-4o-mini`, `llama3.2`, `claude-sonnet-4-5`. */
  readonly name?: string;
  /** Provider, lower-cased, e.g. `openai`, `anthropic`, `ollama`. */
  readonly provider?: string;
  /** Base URL of the model service. */
  readonly url?: string;
  readonly authentication?: AfmAuthentication;
}

/**
 * The data contract of an interface. Defaults: `{type: 'string'}` in and out for consolechat and
 * webchat; for webhook, `input` defaults to `{}` (any JSON payload) and `output` to `{type: 'string'}`.
 * `input_declared` / `output_declared` tell whether the file gave them.
 */
export interface AfmSignature {
  readonly input: JsonSchema;
  readonly output: JsonSchema;
  readonly input_declared: boolean;
  readonly output_declared: boolean;
}

/** How a webchat or webhook interface is exposed over HTTP; `path` is always set (defaulted). */
export interface AfmExposure {
  readonly http: {
    /** Starts with `/`. Defaults: `/chat` (webchat), `/webhook` (webhook). */
    readonly path: string;
  };
}

/** WebSub (or other) subscription of a webhook interface (spec 5.3.3 Subscription Object). */
export interface AfmSubscription {
  /** Required; lower-cased, e.g. `websub`. */
  readonly protocol: string;
  readonly hub?: string;
  readonly topic?: string;
  readonly callback?: string;
  /** HMAC secret checked against `X-Hub-Signature-256` / `X-Hub-Signature`. */
  readonly secret?: string;
  readonly authentication?: AfmAuthentication;
}

/** An interactive terminal chat. */
export interface AfmConsoleChatInterface {
  readonly type: 'consolechat';
  readonly signature: AfmSignature;
}

/** An HTTP chat endpoint (default path `/chat`). */
export interface AfmWebChatInterface {
  readonly type: 'webchat';
  readonly signature: AfmSignature;
  readonly exposure: AfmExposure;
}

/** A webhook endpoint (default path `/webhook`), optionally subscribed through a WebSub hub. */
export interface AfmWebhookInterface {
  readonly type: 'webhook';
  /**
   * Prompt template with `${http:payload…}` / `${http:header…}` variables, checked to compile at load
   * time; absent → the runtime sends the payload as pretty-printed JSON.
   */
  readonly prompt?: string;
  readonly signature: AfmSignature;
  readonly exposure: AfmExposure;
  readonly subscription?: AfmSubscription;
}

/** One interface; at most one of each type per file. */
export type AfmInterface = AfmConsoleChatInterface | AfmWebChatInterface | AfmWebhookInterface;
export type AfmInterfaceType = AfmInterface['type'];
export const AFM_INTERFACE_TYPES: readonly AfmInterfaceType[] = ['consolechat', 'webchat', 'webhook'];

/** MCP over Streamable HTTP (the spec's only transport in 0.3.0). */
export interface AfmMcpHttpTransport {
  readonly type: 'http';
  readonly url: string;
  readonly authentication?: AfmAuthentication;
}

/** MCP over a child process's stdio (the later 0.3.0 text; accepted here). */
export interface AfmMcpStdioTransport {
  readonly type: 'stdio';
  readonly command: string;
  /** Defaults to `[]`. */
  readonly args: readonly string[];
  /** Extra environment for the child; defaults to `{}`. */
  readonly env: { readonly [name: string]: string };
}

export type AfmMcpTransport = AfmMcpHttpTransport | AfmMcpStdioTransport;

/** Tool filter: `allow` first (only these), then `deny` removes; bare tool names. */
export interface AfmToolFilter {
  readonly allow?: readonly string[];
  readonly deny?: readonly string[];
}

/** One MCP server the agent may use; `name` is unique within the file. */
export interface AfmMcpServer {
  readonly name: string;
  readonly transport: AfmMcpTransport;
  readonly tool_filter?: AfmToolFilter;
}

/** `tools`; `mcp` defaults to `[]`. */
export interface AfmTools {
  readonly mcp: readonly AfmMcpServer[];
}

/** A resource the agent serves on its `/mcp`: inline `text`, or a `file` next to the AFM file. */
export interface AfmMcpResource {
  /** Absolute URI, e.g. `docs://style-guide`; unique within the file. */
  readonly uri: string;
  readonly name: string;
  readonly description?: string;
  /** Defaults: `text/plain` for `text`; for `file` by extension (`.md` → `text/markdown`, …). */
  readonly mimeType: string;
  readonly text?: string;
  /** Relative to the AFM file's directory; read (at most 1 MiB) on every `resources/read`. */
  readonly file?: string;
}

/** One argument of a served prompt; `required` defaults to false. */
export interface AfmMcpPromptArgument {
  readonly name: string;
  readonly description?: string;
  readonly required: boolean;
}

/** A prompt the agent serves on its `/mcp`; `${arg:NAME}` in `template` is replaced by an argument. */
export interface AfmMcpPrompt {
  readonly name: string;
  readonly description?: string;
  readonly arguments: readonly AfmMcpPromptArgument[];
  readonly template: string;
}

/** `x-amf.mcp`: what the agent serves over MCP on its worker besides its own tool. */
export interface AfmMcpServing {
  readonly resources: readonly AfmMcpResource[];
  readonly prompts: readonly AfmMcpPrompt[];
  /** Also serve the tools, resources and prompts of `tools.mcp` (default false). */
  readonly reexport_servers: boolean;
}

/**
 * AMF's extension block `x-amf` in the front matter: how the agent joins the mesh. Command-line flags
 * (`amf run --tags`) override it. Defaults: `tags` = `[]` (the runtime then derives one tag from the
 * agent name), `trust` = `local`, `visibility` = `local`.
 */
export interface AfmMeshOptions {
  /** Capability tags, each `[a-z0-9-]{1,64}`. */
  readonly tags: readonly string[];
  /** Trust domain advertised (`local`, `team`, `public`, …). */
  readonly trust: string;
  readonly visibility: Visibility;
  /** Short alias for MCP tool names, `[A-Za-z0-9_.-]{1,64}`; the coordinator decides if granted. */
  readonly tool_alias?: string;
  /** Resources, prompts and re-exported servers served on the agent's `/mcp` (default: none). */
  readonly mcp: AfmMcpServing;
}

/** Default `max_iterations` when the file gives none (the reference runtime's choice, see docs/afm.md). */
export const DEFAULT_MAX_ITERATIONS = 10;

/** A complete, defaulted AFM agent definition. */
export interface AfmDefinition {
  /** Declared spec version, when given (a mismatch with 0.3.x is a note, not an error). */
  readonly spec_version?: string;
  /** Defaults to the file name without `.afm.md` / `.afm`. */
  readonly name: string;
  /** Defaults to the first paragraph of `# Role` (whitespace collapsed, at most 300 characters). */
  readonly description: string;
  /** Defaults to `0.0.0`. */
  readonly version: string;
  /** `authors` if given, else `[author]` if given, else `[]`. Each `Name <Email>` (not enforced). */
  readonly authors: readonly string[];
  readonly provider?: AfmProvider;
  readonly icon_url?: string;
  readonly license?: string;
  readonly model: AfmModel;
  /** Never empty: a single default consolechat when the file gives none. */
  readonly interfaces: readonly AfmInterface[];
  readonly tools: AfmTools;
  /** Tool-call rounds per run; defaults to DEFAULT_MAX_ITERATIONS. */
  readonly max_iterations: number;
  /** Text of the `# Role` section (trimmed). */
  readonly role: string;
  /** Text of the `# Instructions` section (trimmed). */
  readonly instructions: string;
  readonly 'x-amf': AfmMeshOptions;
  readonly source: AfmSourceMap;
}

/** How serious a problem is: errors make the file invalid, notes do not. */
export type AfmSeverity = 'error' | 'note';

/** One problem found in an AFM file, with the place it was found. */
export interface AfmProblem {
  readonly severity: AfmSeverity;
  readonly file: string;
  readonly line: number;
  readonly column: number;
  readonly message: string;
  /** JSON Pointer of the front-matter value concerned, when there is one. */
  readonly pointer?: string;
}

/** What `validateAfmFile` / `parseAfm` return: every problem, and the definition when there are no errors. */
export interface AfmValidationResult {
  readonly definition?: AfmDefinition;
  readonly problems: readonly AfmProblem[];
}

/** HTTP headers as Node gives them (`IncomingHttpHeaders`) or as a plain record; names any case. */
export type WebhookHeaders = { readonly [name: string]: string | readonly string[] | undefined };

/** A compiled webhook prompt template: throws WebhookTemplateError when a reference is missing. */
export type WebhookTemplate = (payload: unknown, headers: WebhookHeaders) => string;
