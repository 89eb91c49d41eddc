/**
 * Keeps the registry's enrolled keys (registry/enrollments.ts) in the shared `amf_enrollments`
 * bucket, so an approved or invited agent keeps its NATS user across a coordinator restart, and
 * every coordinator on the same NATS (each answers the auth callout) knows the same keys. Local
 * enrollments are written there; the bucket is watched for what other coordinators write, and each
 * notice is reconciled with the key's current value (never taken from the notice itself), so a
 * late echo of an older write cannot bring back a key that was forgotten since.
 */
import type { KV } from '@nats-io/kv';
import type { LogFn } from '../log.js';
import type { AgentRegistry } from '../registry/agentRegistry.js';
import { isEnrollment, type Enrollment, type EnrollmentRequest } from '../registry/enrollments.js';
import { jsonBytes } from '../util/jsonBytes.js';

export class EnrollmentStore {
  private stopWatch: (() => void) | undefined;
  private unsubscribe: (() => void) | undefined;
  /** The last write of each key made here, so enroll() can wait for its own. */
  private readonly writes = new Map<string, Promise<void>>();
  private closed = false;

  constructor(
    private readonly kv: KV,
    private readonly registry: AgentRegistry,
    private readonly log: LogFn,
  ) {}

  /** Loads the stored enrollments into the registry, then mirrors changes both ways. */
  async start(): Promise<void> {
    const keys = await this.kv.keys();
    for await (const key of keys) await this.reconcile(key);
    this.unsubscribe = this.registry.onEnrollment((change) => {
      if (change.origin !== 'local' || this.closed) return;
      const key = change.enrollment.nkey;
      const write =
        change.kind === 'enrolled'
          ? this.kv.put(key, jsonBytes(change.enrollment)).then(() => undefined)
          : this.kv.delete(key);
      const tracked = write.catch((err: unknown) => {
        if (!this.closed) this.log('warn', 'enrollment not stored', { nkey: key, err: String(err) });
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
      if (!this.closed) this.log('warn', 'the watch of enrolled keys stopped', { err: String(err) });
    });
  }

  /**
   * Enrolls a key and resolves once the enrollment is stored mesh-wide (see Coordinator.enrollKey).
   * Rejects with AmfError INVALID_REQUEST when the registry refuses it.
   */
  async enroll(request: EnrollmentRequest): Promise<Enrollment> {
    const enrollment = this.registry.enroll(request);
    await this.writes.get(enrollment.nkey);
    return enrollment;
  }

  /** Resolves once the writes made here so far are done. */
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
    let value: unknown;
    try {
      const entry = await this.kv.get(key);
      value = entry && entry.operation === 'PUT' && entry.length > 0 ? entry.json<unknown>() : undefined;
    } catch (err) {
      this.log('warn', 'stored enrollment not read', { key, err: String(err) });
      return;
    }
    if (value === undefined) return this.registry.unenroll(key, 'store');
    if (!isEnrollment(value) || value.nkey !== key) {
      this.log('warn', 'stored enrollment ignored: not an enrollment', { key });
      return;
    }
    this.registry.restoreEnrollment(value);
  }
}
