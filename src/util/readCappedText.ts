/**
 * Reads a fetch Response body as UTF-8 text, but never more than a limit: a body that declares or
 * streams more is cancelled, so a hostile server cannot make us buffer it. Callers turn the
 * "too large" outcome into their own error (card fetches, A2A replies, LLM answers).
 */
export type CappedText = { ok: true; text: string } | { ok: false; declaredBytes?: number };

export async function readCappedText(res: Response, maxBytes: number): Promise<CappedText> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    return { ok: false, declaredBytes: declared };
  }
  if (!res.body) return { ok: true, text: '' };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return { ok: false };
    }
    chunks.push(value);
  }
  return { ok: true, text: Buffer.concat(chunks).toString('utf8') };
}
