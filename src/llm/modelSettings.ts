/**
 * Turns an AFM `model` block ({provider, name, url, authentication}) plus the environment into the
 * settings of one model client: which wire protocol, which base URL, which key, which model name,
 * and the limits of a call. Resolved once when an agent loads, so a missing key or a bad URL is
 * reported before the first user waits for an answer.
 */
import { AmfError } from '../errors.js';
import { isNeverFetchedHost } from '../net/hostRules.js';
import type { ProviderKind } from './types.js';

/** The AFM `model` block as the parser hands it over (every field optional, as in the spec). */
export interface AfmModelConfig {
  readonly name?: string | undefined;
  readonly provider?: string | undefined;
  readonly url?: string | undefined;
  readonly authentication?: { readonly type: string; readonly [key: string]: unknown } | undefined;
}

/** Everything a provider client needs; frozen by `resolveModelSettings`. */
export interface ModelSettings {
  readonly kind: ProviderKind;
  /** The provider name as configured, lower-cased (`openai`, `ollama`, `anthropic`, ...). */
  readonly provider: string;
  readonly model: string;
  /** Base URL without a trailing slash and without the endpoint path (`.../v1` for OpenAI-compatible). */
  readonly baseUrl: string;
  /** Secret; never logged and never part of an error message. */
  readonly apiKey: string | undefined;
  /** `bearer` sends the key as a bearer token, `api-key` as the provider's API key. */
  readonly authType: 'api-key' | 'bearer' | 'none';
  /** Deadline of one model call, streaming included. */
  readonly timeoutMs: number;
  /** Retries of the SDK on 408/409/429/5xx and connection errors. */
  readonly maxRetries: number;
  /** Output token cap sent to Anthropic (required there) and, when set by env, to OpenAI-compatible servers. */
  readonly maxTokens: number;
  /** Whether `maxTokens` came from the environment (only then is it sent to OpenAI-compatible servers). */
  readonly maxTokensExplicit: boolean;
}

/** Public OpenAI endpoint used when neither `model.url` nor OPENAI_BASE_URL is set. */
export const DEFAULT_OPENAI_BASE_URL = 'https://api.openai.com/v1';
/** Public Anthropic endpoint used when neither `model.url` nor ANTHROPIC_BASE_URL is set. */
export const DEFAULT_ANTHROPIC_BASE_URL = 'https://api.anthropic.com';
/** Model names used when `model.name` is absent (the AFM reference runner's defaults). */
export const DEFAULT_OPENAI_MODEL = 'gpt-4o';
export const DEFAULT_ANTHROPIC_MODEL = 'claude-sonnet-4-5';
export const DEFAULT_MODEL_TIMEOUT_MS = 120_000;
export const DEFAULT_MAX_TOKENS = 4096;
export const DEFAULT_MAX_RETRIES = 2;

interface ProviderDefaults {
  readonly kind: ProviderKind;
  readonly baseUrl: string;
  /** Model used when `model.name` is absent; undefined = the name is required. */
  readonly model: string | undefined;
  /** Local servers run without a key; hosted APIs need one. */
  readonly needsKey: boolean;
}

// Local servers listen on their documented default ports on loopback; the user points `model.url`
// elsewhere when the server runs on another host.
const PROVIDERS: Readonly<Record<string, ProviderDefaults>> = {
  openai: { kind: 'openai', baseUrl: DEFAULT_OPENAI_BASE_URL, model: DEFAULT_OPENAI_MODEL, needsKey: true },
  'openai-compatible': { kind: 'openai', baseUrl: '', model: undefined, needsKey: false },
  ollama: { kind: 'openai', baseUrl: 'http://127.0.0.1:11434/v1', model: undefined, needsKey: false },
  vllm: { kind: 'openai', baseUrl: 'http://127.0.0.1:8000/v1', model: undefined, needsKey: false },
  // llama.cpp's server answers with whatever model it loaded, whatever name it is sent.
  llamacpp: { kind: 'openai', baseUrl: 'http://127.0.0.1:8080/v1', model: 'default', needsKey: false },
  lmstudio: { kind: 'openai', baseUrl: 'http://127.0.0.1:1234/v1', model: undefined, needsKey: false },
  anthropic: {
    kind: 'anthropic',
    baseUrl: DEFAULT_ANTHROPIC_BASE_URL,
    model: DEFAULT_ANTHROPIC_MODEL,
    needsKey: true,
  },
};

const ALIASES: Readonly<Record<string, string>> = {
  'llama.cpp': 'llamacpp',
  'llama-cpp': 'llamacpp',
  'lm-studio': 'lmstudio',
  'lm studio': 'lmstudio',
  openai_compatible: 'openai-compatible',
  claude: 'anthropic',
};

/** Provider names `model.provider` accepts (aliases aside). */
export const KNOWN_PROVIDERS = Object.keys(PROVIDERS);

function positiveInt(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined || value.trim() === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new AmfError('INVALID_REQUEST', `${name} must be a non-negative integer, got "${value}"`);
  return n;
}

/**
 * Checks a model URL and strips the endpoint path people often paste (`.../chat/completions`,
 * `.../v1/messages`): the SDKs want the base and add the path themselves.
 */
export function normalizeBaseUrl(kind: ProviderKind, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new AmfError('INVALID_REQUEST', `model.url "${raw.slice(0, 100)}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new AmfError('INVALID_REQUEST', `model.url must be http(s), got ${url.protocol}`);
  if (url.username || url.password)
    throw new AmfError('INVALID_REQUEST', 'model.url must not carry credentials; use model.authentication');
  if (isNeverFetchedHost(url.hostname))
    throw new AmfError(
      'INVALID_REQUEST',
      `model.url host ${url.hostname} is a cloud metadata or link-local address; refused`,
    );
  let path = url.pathname.replace(/\/+$/, '');
  if (kind === 'openai') path = path.replace(/\/chat\/completions$/, '');
  else path = path.replace(/\/messages$/, '').replace(/\/v1$/, '');
  return `${url.protocol}//${url.host}${path}`;
}

function credentials(
  auth: AfmModelConfig['authentication'],
  envKey: string | undefined,
): { apiKey: string | undefined; authType: ModelSettings['authType'] } {
  if (!auth)
    return envKey ? { apiKey: envKey, authType: 'api-key' } : { apiKey: undefined, authType: 'none' };
  const type = String(auth.type).toLowerCase();
  const field = type === 'api-key' || type === 'apikey' ? 'api_key' : type === 'bearer' ? 'token' : undefined;
  if (!field)
    throw new AmfError(
      'INVALID_REQUEST',
      `model.authentication type "${auth.type}" is not supported for model providers; use api-key (api_key) or bearer (token)`,
    );
  const value = auth[field];
  if (typeof value !== 'string' || value === '')
    throw new AmfError(
      'INVALID_REQUEST',
      `model.authentication of type ${type} needs a non-empty "${field}"`,
    );
  return { apiKey: value, authType: field === 'token' ? 'bearer' : 'api-key' };
}

/**
 * Resolves the settings of an agent's model. The provider defaults to `anthropic` for model names
 * starting with `claude`, else `openai`. Keys: `model.authentication` wins, then OPENAI_API_KEY (for
 * `openai`/`openai-compatible`) or ANTHROPIC_API_KEY; base URLs: `model.url`, then OPENAI_BASE_URL or
 * ANTHROPIC_BASE_URL, then the provider's default. Limits: AMF_LLM_TIMEOUT_MS, AMF_LLM_MAX_TOKENS,
 * AMF_LLM_MAX_RETRIES.
 */
export function resolveModelSettings(
  model: AfmModelConfig | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
): ModelSettings {
  const given = model?.provider?.trim().toLowerCase();
  const name = model?.name?.trim() || undefined;
  const providerName = given
    ? (ALIASES[given] ?? given)
    : name?.toLowerCase().startsWith('claude')
      ? 'anthropic'
      : 'openai';
  const defaults = PROVIDERS[providerName];
  if (!defaults)
    throw new AmfError(
      'INVALID_REQUEST',
      `model.provider "${model?.provider}" is not supported; use one of ${KNOWN_PROVIDERS.join(', ')}`,
    );
  const kind = defaults.kind;
  const envBase =
    providerName === 'openai'
      ? env.OPENAI_BASE_URL?.trim()
      : providerName === 'anthropic'
        ? env.ANTHROPIC_BASE_URL?.trim()
        : undefined;
  const rawBase = model?.url?.trim() || envBase || defaults.baseUrl;
  if (!rawBase) throw new AmfError('INVALID_REQUEST', `model.url is required for provider ${providerName}`);
  const baseUrl = normalizeBaseUrl(kind, rawBase);
  const envKey =
    kind === 'anthropic'
      ? env.ANTHROPIC_API_KEY
      : providerName === 'openai' || providerName === 'openai-compatible'
        ? env.OPENAI_API_KEY
        : undefined;
  const { apiKey, authType } = credentials(model?.authentication, envKey || undefined);
  // A hosted API without a key would only answer 401; say what to set instead.
  const isDefaultHost = rawBase === defaults.baseUrl;
  if (defaults.needsKey && isDefaultHost && !apiKey)
    throw new AmfError(
      'INVALID_REQUEST',
      `provider ${providerName} at ${baseUrl} needs an API key: set ${kind === 'anthropic' ? 'ANTHROPIC_API_KEY' : 'OPENAI_API_KEY'} or model.authentication`,
    );
  const modelName = name ?? defaults.model;
  if (!modelName)
    throw new AmfError('INVALID_REQUEST', `model.name is required for provider ${providerName}`);
  const maxTokensRaw = env.AMF_LLM_MAX_TOKENS;
  const maxTokens = positiveInt(maxTokensRaw, 'AMF_LLM_MAX_TOKENS', DEFAULT_MAX_TOKENS);
  return Object.freeze({
    kind,
    provider: providerName,
    model: modelName,
    baseUrl,
    apiKey,
    authType,
    timeoutMs:
      positiveInt(env.AMF_LLM_TIMEOUT_MS, 'AMF_LLM_TIMEOUT_MS', DEFAULT_MODEL_TIMEOUT_MS) ||
      DEFAULT_MODEL_TIMEOUT_MS,
    maxRetries: positiveInt(env.AMF_LLM_MAX_RETRIES, 'AMF_LLM_MAX_RETRIES', DEFAULT_MAX_RETRIES),
    maxTokens: maxTokens || DEFAULT_MAX_TOKENS,
    maxTokensExplicit: maxTokensRaw !== undefined && maxTokensRaw.trim() !== '' && maxTokens > 0,
  });
}
