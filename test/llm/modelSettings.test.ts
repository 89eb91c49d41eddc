// How an AFM `model` block and the environment become provider settings: defaults per provider,
// precedence of AFM over env, URL normalization, and the refusals that say what to fix.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_ANTHROPIC_BASE_URL,
  DEFAULT_ANTHROPIC_MODEL,
  DEFAULT_OPENAI_BASE_URL,
  DEFAULT_OPENAI_MODEL,
  resolveModelSettings,
} from '../../src/llm/index.js';
import { AmfError } from '../../src/errors.js';

function refusal(fn: () => unknown): AmfError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AmfError);
    return err as AmfError;
  }
  throw new Error('expected a refusal');
}

describe('resolveModelSettings', () => {
  it('defaults to OpenAI with OPENAI_API_KEY and the reference model', () => {
    const s = resolveModelSettings(undefined, { OPENAI_API_KEY: 'sk-env' });
    expect(s).toMatchObject({
      kind: 'openai',
      provider: 'openai',
      model: DEFAULT_OPENAI_MODEL,
      baseUrl: DEFAULT_OPENAI_BASE_URL,
      apiKey: 'sk-env',
    });
  });

  it('takes OPENAI_BASE_URL (an Ollama behind the OpenAI env) and needs no key there', () => {
    const s = resolveModelSettings({ name: 'llama3.2' }, { OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1/' });
    expect(s).toMatchObject({ kind: 'openai', baseUrl: 'http://127.0.0.1:11434/v1', apiKey: undefined });
  });

  it('refuses the hosted OpenAI API without a key, naming the variable to set', () => {
    expect(refusal(() => resolveModelSettings({ provider: 'openai' }, {})).message).toContain(
      'OPENAI_API_KEY',
    );
  });

  it('knows the local OpenAI-compatible servers and their default ports', () => {
    const env = {};
    expect(resolveModelSettings({ provider: 'ollama', name: 'qwen3' }, env).baseUrl).toBe(
      'http://127.0.0.1:11434/v1',
    );
    expect(resolveModelSettings({ provider: 'vllm', name: 'm' }, env).baseUrl).toBe(
      'http://127.0.0.1:8000/v1',
    );
    expect(resolveModelSettings({ provider: 'llama.cpp' }, env)).toMatchObject({
      provider: 'llamacpp',
      baseUrl: 'http://127.0.0.1:8080/v1',
      model: 'default',
    });
    expect(resolveModelSettings({ provider: 'LMStudio', name: 'm' }, env).baseUrl).toBe(
      'http://127.0.0.1:1234/v1',
    );
    expect(refusal(() => resolveModelSettings({ provider: 'ollama' }, env)).message).toContain(
      'model.name is required',
    );
  });

  it('uses Anthropic for claude models, with ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL', () => {
    expect(resolveModelSettings({ name: 'claude-haiku-4-5' }, { ANTHROPIC_API_KEY: 'ak' })).toMatchObject({
      kind: 'anthropic',
      baseUrl: DEFAULT_ANTHROPIC_BASE_URL,
      apiKey: 'ak',
    });
    expect(
      resolveModelSettings(
        { provider: 'anthropic' },
        { ANTHROPIC_API_KEY: 'ak', ANTHROPIC_BASE_URL: 'http://127.0.0.1:9999' },
      ),
    ).toMatchObject({ model: DEFAULT_ANTHROPIC_MODEL, baseUrl: 'http://127.0.0.1:9999' });
    expect(refusal(() => resolveModelSettings({ provider: 'anthropic' }, {})).message).toContain(
      'ANTHROPIC_API_KEY',
    );
  });

  it('lets model.url and model.authentication win over the environment', () => {
    const s = resolveModelSettings(
      {
        provider: 'openai',
        url: 'http://10.1.2.3:8000/v1',
        authentication: { type: 'bearer', token: 'tok' },
      },
      { OPENAI_API_KEY: 'env-key', OPENAI_BASE_URL: 'http://127.0.0.1:1/v1' },
    );
    expect(s).toMatchObject({ baseUrl: 'http://10.1.2.3:8000/v1', apiKey: 'tok', authType: 'bearer' });
  });

  it('strips endpoint paths people paste as model.url', () => {
    const key = { authentication: { type: 'api-key', api_key: 'k' } };
    expect(
      resolveModelSettings(
        { provider: 'openai', url: 'https://10.0.0.5:8443/v1/chat/completions', ...key },
        {},
      ).baseUrl,
    ).toBe('https://10.0.0.5:8443/v1');
    expect(
      resolveModelSettings({ provider: 'anthropic', url: 'https://10.0.0.6/v1/messages', ...key }, {})
        .baseUrl,
    ).toBe('https://10.0.0.6');
  });

  it('refuses what would never work, saying what to change', () => {
    expect(refusal(() => resolveModelSettings({ provider: 'gemini' }, {})).message).toMatch(
      /not supported.*ollama/,
    );
    expect(
      refusal(() => resolveModelSettings({ provider: 'ollama', name: 'm', url: 'ftp://x/v1' }, {})).message,
    ).toContain('http(s)');
    expect(
      refusal(() =>
        resolveModelSettings({ provider: 'ollama', name: 'm', url: 'http://u:p@127.0.0.1/v1' }, {}),
      ).message,
    ).toContain('must not carry credentials');
    expect(
      refusal(() =>
        resolveModelSettings({ provider: 'vllm', name: 'm', url: 'http://169.254.169.254/v1' }, {}),
      ).message,
    ).toContain('metadata');
    expect(
      refusal(() =>
        resolveModelSettings({ provider: 'openai', authentication: { type: 'oauth2', client_id: 'x' } }, {}),
      ).message,
    ).toContain('use api-key');
    expect(
      refusal(() => resolveModelSettings({ provider: 'openai', authentication: { type: 'bearer' } }, {}))
        .message,
    ).toContain('"token"');
    expect(
      refusal(() => resolveModelSettings({ provider: 'ollama', name: 'm' }, { AMF_LLM_TIMEOUT_MS: 'soon' }))
        .message,
    ).toContain('AMF_LLM_TIMEOUT_MS');
  });

  it('reads the call limits from the environment', () => {
    const s = resolveModelSettings(
      { provider: 'ollama', name: 'm' },
      { AMF_LLM_TIMEOUT_MS: '5000', AMF_LLM_MAX_TOKENS: '256', AMF_LLM_MAX_RETRIES: '0' },
    );
    expect(s).toMatchObject({ timeoutMs: 5000, maxTokens: 256, maxTokensExplicit: true, maxRetries: 0 });
    expect(Object.isFrozen(s)).toBe(true);
  });
});
