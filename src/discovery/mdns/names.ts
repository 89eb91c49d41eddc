/**
 * Names in mDNS/DNS-SD: how names compare, how service instance names are built and taken apart,
 * the rules an instance label must keep, the rename after a conflict, and the host name and
 * addresses an advertiser publishes. Kept apart from the socket and the protocol state so both the
 * advertiser and the browser read names the same way.
 */
import { hostname, networkInterfaces } from 'node:os';
import { isIPv4, isIPv6 } from 'node:net';
import { isLinkLocal } from '../../net/hostRules.js';
import { AmfError } from '../../errors.js';

/** A DNS label holds at most 63 bytes (RFC 1035). */
const MAX_LABEL_BYTES = 63;

/**
 * DNS names compare case-insensitively for ASCII letters only (RFC 6762 section 16); a trailing dot
 * is dropped so `a.local.` (python-zeroconf) and `a.local` (dns-packet) are one name.
 */
export function canonicalName(name: string): string {
  return name.replace(/\.$/, '').replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/** `<type>.local`, the name browsers ask PTR questions about. */
export function serviceDomain(serviceType: string): string {
  return `${serviceType}.local`;
}

/** The label before `.<type>.local` of a service instance name, or null when it is no such name. */
export function instanceLabel(fqdn: string, serviceType: string): string | null {
  const suffix = `.${serviceDomain(serviceType)}`;
  const name = fqdn.replace(/\.$/, '');
  if (name.length <= suffix.length || canonicalName(name.slice(-suffix.length)) !== canonicalName(suffix))
    return null;
  return name.slice(0, -suffix.length);
}

/**
 * True for class IN or ANY, also with the top bit set: dns-packet cannot split the unicast-response
 * and cache-flush bits off a question's class and reports `UNKNOWN_32769` for QU questions.
 */
export function isInternetClass(cls: unknown): boolean {
  return (
    cls === undefined || cls === 'IN' || cls === 'ANY' || cls === 'UNKNOWN_32769' || cls === 'UNKNOWN_33023'
  );
}

/** RFC 6762 9 rename after a conflict: "name" → "name (2)" → "name (3)", shortening the base to stay within one label. */
export function nextInstanceName(name: string): string {
  const match = /^(.*) \((\d+)\)$/.exec(name);
  let base = match?.[1] ?? name;
  const suffix = ` (${match ? Number(match[2]) + 1 : 2})`;
  while (Buffer.byteLength(base + suffix) > MAX_LABEL_BYTES) base = [...base].slice(0, -1).join('');
  return base + suffix;
}

/** Refuses what cannot be one DNS label here (dns-packet cannot escape dots inside a label). */
export function checkLabel(label: string, what: string): void {
  const bytes = Buffer.byteLength(label);
  if (
    bytes < 1 ||
    bytes > MAX_LABEL_BYTES ||
    label.includes('.') ||
    [...label].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)
  ) {
    throw new AmfError(
      'INVALID_REQUEST',
      `${what} "${label}" must be 1–${MAX_LABEL_BYTES} UTF-8 bytes without dots or control characters`,
    );
  }
}

/** The SRV target: the given name under `.local`, or `amf-<hostname>.local` (not the OS's own name, which the OS responder may own). */
export function hostName(host: string | undefined): string {
  const raw = host ?? `amf-${hostname()}`;
  const base = raw.replace(/\.$/, '').replace(/\.local$/i, '');
  const label =
    host === undefined
      ? base
          .toLowerCase()
          .replace(/[^a-z0-9-]+/g, '-')
          .slice(0, MAX_LABEL_BYTES)
      : base;
  for (const part of label.split('.')) checkLabel(part, 'host');
  return `${label}.local`;
}

/** The addresses published for the host: the chosen interface's, else every external one, else loopback. */
export function hostAddresses(interfaceAddress: string | undefined): string[] {
  if (interfaceAddress !== undefined) return [interfaceAddress];
  const all = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  const external = all
    // IPv6 link-local addresses need a zone to be reached, which an A/AAAA record cannot carry.
    .filter((e) => !e.internal && (isIPv4(e.address) || (isIPv6(e.address) && !isLinkLocal(e.address))))
    .map((e) => e.address);
  const chosen =
    external.length > 0 ? external : all.filter((e) => e.internal && isIPv4(e.address)).map((e) => e.address);
  return [...new Set(chosen)].slice(0, 16);
}
