/**
 * The address other machines should use for a server bound to `bindHost`. A specific address is
 * its own answer; a wildcard (`0.0.0.0`, `::`) is not an address anyone can dial, so the machine's
 * first LAN address stands in for it (the mDNS interface when one is configured). Loopback stays
 * loopback: a server bound there is not meant to be reached from elsewhere.
 */
import { networkInterfaces } from 'node:os';

/** True for the wildcard bind addresses. */
export function isWildcardHost(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]' || host === '';
}

/** The first non-internal IPv4 address of this machine (then IPv6), if it has one. */
export function firstLanAddress(): string | undefined {
  const all = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  const external = all.filter((a) => !a.internal);
  return (
    external.find((a) => a.family === 'IPv4')?.address ??
    external.find((a) => a.family === 'IPv6' && !a.address.startsWith('fe80'))?.address
  );
}

/** The host to put in URLs for a server bound to `bindHost` (see the module comment). */
export function advertisedHost(bindHost: string, preferred?: string): string {
  if (!isWildcardHost(bindHost)) return bindHost;
  return preferred ?? firstLanAddress() ?? '127.0.0.1';
}

/** `url` with its host replaced by the advertised host of `bindHost` when it names a wildcard or loopback stand-in. */
export function advertisedUrl(url: string, bindHost: string, preferred?: string): string {
  if (!isWildcardHost(bindHost)) return url;
  const u = new URL(url);
  const host = advertisedHost(bindHost, preferred);
  u.hostname = host.includes(':') ? `[${host}]` : host;
  return u.href.replace(/\/$/, '');
}
