/**
 * How `amf worker` finds its coordinator when no `--coordinator` URL is given: the coordinator
 * advertises itself as an `_amf-agent._tcp` instance whose TXT record carries `role=coordinator`
 * (txtRecord.ts) and its base URL in `ep`; the worker browses until the first such record arrives.
 */
import { AmfError } from '../errors.js';
import { MAX_TXT_BYTES, type RawAdvertisement } from './advertisement.js';
import { startMdnsBrowser, type MdnsBrowser } from './mdns/browser.js';
import { COORDINATOR_ROLE, TXT_ROLE_KEY } from './txtRecord.js';

/** Options of findCoordinatorByMdns. */
export interface FindCoordinatorOptions {
  /** IPv4 address of the one interface to browse on; all interfaces when absent. */
  interfaceAddress?: string;
  /** How long to wait for an answer. */
  timeoutMs: number;
  /** Stops the search early (rejects with the signal's reason). */
  signal?: AbortSignal;
}

/**
 * Browses mDNS for a coordinator and resolves with its base URL (the TXT `ep`, without a trailing
 * slash). Only well-formed records count: valid UTF-8, at most 512 bytes, an http(s) `ep`, status not
 * `offline`. Rejects with a TIMEOUT AmfError when none answers within `timeoutMs`.
 */
export async function findCoordinatorByMdns(options: FindCoordinatorOptions): Promise<string> {
  options.signal?.throwIfAborted();
  let settle: { resolve: (url: string) => void; reject: (err: unknown) => void } | undefined;
  const found = new Promise<string>((resolve, reject) => {
    settle = { resolve, reject };
  });
  // Awaited only once the socket is open; a rejection before then must not count as unhandled.
  found.catch(() => undefined);
  // Listen before the socket opens: an abort while it opens must not be missed.
  const onAbort = () => settle?.reject(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  let browser: MdnsBrowser | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    browser = await startMdnsBrowser({
      ...(options.interfaceAddress === undefined ? {} : { interfaceAddress: options.interfaceAddress }),
      onAdvertisement: (ad) => {
        const url = coordinatorUrl(ad);
        if (url !== null) settle?.resolve(url);
      },
    });
    timer = setTimeout(
      () =>
        settle?.reject(
          new AmfError(
            'TIMEOUT',
            `no coordinator answered on mDNS (_amf-agent._tcp.local with ${TXT_ROLE_KEY}=${COORDINATOR_ROLE}) ` +
              `within ${options.timeoutMs} ms; give its URL with --coordinator`,
          ),
        ),
      options.timeoutMs,
    );
    return await found;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    await browser?.close();
  }
}

/** The coordinator's base URL from an advertisement, or null when it is not a usable coordinator record. */
function coordinatorUrl(ad: RawAdvertisement): string | null {
  const txt = ad.txt;
  if (ad.invalid_utf8 === true || ad.txt_bytes > MAX_TXT_BYTES) return null;
  if (txt[TXT_ROLE_KEY] !== COORDINATOR_ROLE || txt.status === 'offline') return null;
  const ep = txt.ep;
  if (ep === undefined) return null;
  try {
    const url = new URL(ep);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  } catch {
    return null;
  }
  return ep.replace(/\/+$/, '');
}
