/**
 * Keeps the registry's disabled agents (registry/disablements.ts) in the shared `amf_disabled_agents`
 * bucket, one key per agent id, so a disabled agent stays disabled across a coordinator restart and
 * on every coordinator of the same NATS. Local changes are written there (a put to disable, a delete
 * to enable); the bucket is watched for what other coordinators write, and each notice is reconciled
 * with the key's current value (never taken from the notice itself), so a late echo of an older
 * write cannot disable again an agent that was enabled since.
 */
import type { KV } from '@nats-io/kv';
import { kvKey } from '../fabric/jetstream.js';
import type { LogFn } from '../log.js';
import type { AgentRegistry } from '../registry/agentRegistry.js';
import { isDisablement } from '../registry/disablements.js';
import { jsonBytes } from '../util/jsonBytes.js';

export class DisablementStore {
  private stopWatch: (() => void) | undefined;
  private unsubscribe: (() => void) | undefined;
  /** The last write of each key made here, so the operator's route can wait for its own. */
  private readonly writes = new Map<string, Promise<void>>();
  /**
   * How many changes were made here to each key: a reconcile that read the bucket before a later
   * local change landed must not apply what it read (that change's own notice reconciles again).
   */
  private readonly localChanges = new Map<string, number>();
  private closed = false;

  constructor(
    private readonly kv: KV,
    private readonly registry: AgentRegistry,
    private readonly log: LogFn,
  ) {}

  /** Loads the stored disablements into the registry, then mirrors changes both ways. */
  async start(): Promise<void> {
    const keys = await this.kv.keys();
    for await (const key of keys) await this.reconcile(key);
    this.unsubscribe = this.registry.onDisablement((change) => {
      if (change.origin !== 'local' || this.closed) return;
      const key = kvKey(change.agentId);
      this.localChanges.set(key, (this.localChanges.get(key) ?? 0) + 1);
      const write =
        change.kind === 'disabled'
          ? this.kv.put(key, jsonBytes(change.disablement)).then(() => undefined)
          : this.kv.delete(key);
      const tracked = write.catch((err: unknown) => {
        if (!this.closed)
          this.log('warn', `agent ${change.kind} here but not stored for the other coordinators`, {
            agent_id: change.agentId,
            err: String(err),
          });
      });
      this.writes.set(key, tracked);
      void tracked.finally(() => {
        if (this.writes.get(key) === tracked) this.writes.delete(key);
      });
    });
    const updates = await this.kv.watch({ include: 'updates', headers_only: true });
    this.stopWatch = () => updates.stop();
    void (async () => {
      for await (const entry of updates) await this.reconcile(entry.key);
    })().catch((err: unknown) => {
      if (!this.closed) this.log('warn', 'the watch of disabled agents stopped', { err: String(err) });
    });
  }

  /** Resolves once the writes made here so far are done (the route answers after its write). */
  async settled(): Promise<void> {
    await Promise.all([...this.writes.values()]);
  }

  close(): void {
    this.closed = true;
    this.stopWatch?.();
    this.unsubscribe?.();
  }

  /** Makes the registry hold what the bucket holds now for `key`. */
  private async reconcile(key: string): Promise<void> {
    if (this.closed) return;
    const agentId = Buffer.from(key, 'base64url').toString('utf8');
    const changesBefore = this.localChanges.get(key) ?? 0;
    let value: unknown;
    try {
      const entry = await this.kv.get(key);
      value = entry && entry.operation === 'PUT' && entry.length > 0 ? entry.json<unknown>() : undefined;
    } catch (err) {
      this.log('warn', 'stored disablement not read', { key, err: String(err) });
      return;
    }
    // Changed here meanwhile (the operator enabled it again while an older notice was read): what
    // was read may predate that change, whose own notice comes next.
    if ((this.localChanges.get(key) ?? 0) !== changesBefore || this.closed) return;
    if (value === undefined) return this.registry.dropDisablement(agentId);
    if (!isDisablement(value) || kvKey(value.agent_id) !== key) {
      this.log('warn', 'stored disablement ignored: not a disablement of this key', { key });
      return;
    }
    this.registry.restoreDisablement(value);
  }
}
