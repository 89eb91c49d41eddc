/**
 * One HTTP GET for the short client commands (`amf agents`, `amf audit`), over node:http(s) rather
 * than fetch: the global fetch loads undici on first use and keeps the process alive for its pooled
 * socket, which together made `amf agents` take more than a second longer than its work (issue 14).
 * The connection is not pooled (the command ends after one answer) and the answer is bounded.
 */
import http from 'node:http';
import https from 'node:https';
import { AmfError } from '../errors.js';

/** Largest answer read (a registry or audit listing is far smaller). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
const TIMEOUT_MS = 30_000;

/** Status and body text of an answer. */
export interface PlainAnswer {
  status: number;
  ok: boolean;
  text: string;
}

/** GETs `url`; rejects on a network error, a timeout (default 30 s) or an answer above 16 MiB. */
export function plainGet(
  url: URL,
  headers: Record<string, string>,
  timeoutMs = TIMEOUT_MS,
): Promise<PlainAnswer> {
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.get(url, { headers, agent: false, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) {
          req.destroy(
            new AmfError(
              'PAYLOAD_TOO_LARGE',
              `the answer from ${url.origin} is larger than ${MAX_ANSWER_BYTES} bytes`,
            ),
          );
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        resolve({ status, ok: status >= 200 && status < 300, text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('timeout', () =>
      req.destroy(new AmfError('TIMEOUT', `no answer from ${url.origin} within ${timeoutMs / 1000} s`)),
    );
    req.on('error', reject);
  });
}
