/**
 * Reads an answer of an AMF HTTP API as a client: its JSON body (an empty object when it is not
 * JSON) and, for a non-2xx answer, the sentence to show: the AMF error's `message`, else the start
 * of the body as it came.
 */
export interface JsonAnswer {
  body: Record<string, unknown>;
  /** Set when the status is not 2xx. */
  error?: string;
}

export async function readJsonAnswer(res: Response, maxErrorChars = 500): Promise<JsonAnswer> {
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
      body = parsed as Record<string, unknown>;
  } catch {
    // Not JSON: the error below quotes it as it came.
  }
  if (res.ok) return { body };
  const message = (body.error as { message?: unknown } | undefined)?.message;
  return { body, error: typeof message === 'string' ? message : text.slice(0, maxErrorChars) };
}
