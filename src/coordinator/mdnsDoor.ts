/**
 * The mDNS door of discovery: browses `_amf-agent._tcp.local` and hands every new or changed TXT
 * record to the admission pipeline (records of coordinators are skipped: they are not workers), hands
 * it goodbyes too, and advertises this coordinator (`role=coordinator`) so that `amf worker` without
 * `--coordinator` can find it.
 *
 * mDNS is hearsay (docs/security.md, "mDNS never gives power"): the door maps nothing. A goodbye
 * names only an instance; it goes to the pipeline with the address its packet came from, and the
 * pipeline alone knows which instance made which listing (only listings it made after judging —
 * never a denied advertisement, never an agent bound to a key).
 */
import { randomUUID } from 'node:crypto';
import { MDNS_EXPIRED_SOURCE } from '../admission/admissionPipeline.js';
import type { RawAdvertisement } from '../discovery/advertisement.js';
import { startMdnsAdvertiser, type MdnsAdvertiser } from '../discovery/mdns/advertiser.js';
import { startMdnsBrowser, type MdnsBrowser } from '../discovery/mdns/browser.js';
import { COORDINATOR_ROLE, coordinatorTxt, TXT_ROLE_KEY } from '../discovery/txtRecord.js';

export interface MdnsDoorOptions {
  publicUrl: string;
  agentId: string;
  trustDomain: string;
  interfaceAddress?: string;
  submit: (raw: RawAdvertisement) => void;
  onError: (err: unknown) => void;
}

export class MdnsDoor {
  private constructor(
    private readonly browser: MdnsBrowser,
    private readonly advertiser: MdnsAdvertiser,
  ) {}

  static async start(options: MdnsDoorOptions): Promise<MdnsDoor> {
    const browser = await startMdnsBrowser({
      ...(options.interfaceAddress ? { interfaceAddress: options.interfaceAddress } : {}),
      onError: options.onError,
      onAdvertisement: (ad) => {
        if (ad.txt[TXT_ROLE_KEY] === COORDINATOR_ROLE) return;
        options.submit(ad);
      },
      onGoodbye: (instance, origin) => {
        options.submit({
          raw_id: randomUUID(),
          door: 'mdns',
          // Where the TTL-0 packet came from; a record that ran out has no packet.
          source: origin?.address ?? MDNS_EXPIRED_SOURCE,
          received_at: new Date().toISOString(),
          txt: {},
          txt_bytes: 0,
          instance,
          goodbye: true,
        });
      },
    });
    const url = new URL(options.publicUrl);
    let advertiser: MdnsAdvertiser;
    try {
      advertiser = await startMdnsAdvertiser({
        instanceName: `amf-coordinator-${options.agentId.slice(-8)}`,
        port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
        txt: coordinatorTxt({
          agent_id: options.agentId,
          endpoint: options.publicUrl,
          protocols_supported: ['A2A/1.0'],
          trust_domain: options.trustDomain,
          visibility: 'local',
          card_url: `${options.publicUrl}/.well-known/agent-card.json`,
        }),
        ...(options.interfaceAddress ? { interfaceAddress: options.interfaceAddress } : {}),
        onError: options.onError,
      });
    } catch (err) {
      await browser.close();
      throw err;
    }
    return new MdnsDoor(browser, advertiser);
  }

  /** Says goodbye for the coordinator's record and stops browsing. */
  async close(): Promise<void> {
    await Promise.allSettled([this.advertiser.close(), this.browser.close()]);
  }
}
