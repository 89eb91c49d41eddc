/**
 * The bounded store of deferred AMP jobs behind `GET /api/amp/jobs/{id}`. At most `maxJobs` are kept;
 * when full, the oldest finished job is forgotten first, and while every job is still running a new
 * one is refused (`overloaded`) rather than evicting work somebody is waiting for. Job ids are random
 * UUIDs, so one caller cannot guess another's job.
 */
import { randomUUID } from 'node:crypto';
import type { AmpResponse } from './ampMessage.js';

/** Where the reply_to delivery of a job stands. */
export interface JobDelivery {
  replyTo: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  error?: string;
}

/** One deferred job. */
export interface AmpJob {
  id: string;
  /** The AMP id of the request it answers. */
  requestId: string;
  createdAt: number;
  state: 'running' | 'done';
  /** The final AMP response, once done. */
  response?: AmpResponse;
  taskId?: string;
  delivery?: JobDelivery;
}

/** Bounded job table, insertion-ordered. */
export class AmpJobStore {
  private readonly jobs = new Map<string, AmpJob>();

  constructor(private readonly maxJobs: number) {}

  /** A new running job, or undefined when the store is full of running jobs. */
  create(requestId: string, replyTo?: string): AmpJob | undefined {
    if (this.jobs.size >= this.maxJobs && !this.evictOldestFinished()) return undefined;
    const job: AmpJob = { id: randomUUID(), requestId, createdAt: Date.now(), state: 'running' };
    if (replyTo) job.delivery = { replyTo, state: 'pending', attempts: 0 };
    this.jobs.set(job.id, job);
    return job;
  }

  /** Records the final response of a job (if it is still kept). */
  finish(id: string, response: AmpResponse): void {
    const job = this.jobs.get(id);
    if (!job) return;
    job.state = 'done';
    job.response = response;
  }

  get(id: string): AmpJob | undefined {
    return this.jobs.get(id);
  }

  get size(): number {
    return this.jobs.size;
  }

  get runningCount(): number {
    let n = 0;
    for (const j of this.jobs.values()) if (j.state === 'running') n++;
    return n;
  }

  private evictOldestFinished(): boolean {
    for (const [id, job] of this.jobs) {
      if (job.state === 'done' && job.delivery?.state !== 'pending') {
        this.jobs.delete(id);
        return true;
      }
    }
    return false;
  }
}
