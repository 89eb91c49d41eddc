/**
 * A worker's intake from the work queue (stream AMF_WORK): per tag, pull requests for as many
 * announcements as it has free slots (in batches), run each through the worker's one run path and
 * keep its message in progress until the result is decided. NATS outages only pause the pulls.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { parseAnnouncement } from '../events/announcement.js';
import type { ChatMessage } from '../events/payloads.js';
import { workConsumerName } from '../events/subjects.js';
import { validateEvent } from '../events/validateEvent.js';
import { WorkQueuePuller, type WorkItem } from '../fabric/workQueue.js';
import type { LocalOutcome } from './invokeHandler.js';
import type { RunTaskOptions, TaskInput } from './meshWorker.js';
import type { TaskSlots } from './taskSlots.js';

/** In-progress signals keep a running task's message from redelivery (the consumer's ack wait is 30 s). */
const WORK_PROGRESS_MS = 10_000;
/**
 * The most one pull request asks for: a worker that stops (SIGSTOP, a hung host) holds at most this
 * many delivered-but-unstarted tasks until their ack wait sends them elsewhere.
 */
const MAX_PULL_BATCH = 8;
/** How often the loop looks again when nothing happened (drain, an expired pull, a paused consumer). */
const IDLE_CHECK_MS = 250;
/** How long a task offered for other workers waits before it can come back here. */
const NOT_FOR_ME_DELAY_MS = 1_000;

export interface WorkIntakeDeps {
  nc: NatsConnection;
  /** This worker's agent id (a re-offer may name it as one that may not take the task). */
  agentId: string;
  slots: TaskSlots;
  /** How many tags share the slots (each tag's pulls ask for at most its share). */
  tagCount: number;
  draining: () => boolean;
  /** The operator disabled this agent: it asks for no work until enabled (it keeps what it holds). */
  paused?: () => boolean;
  run: (task: TaskInput, options: RunTaskOptions) => Promise<LocalOutcome>;
}

export class WorkIntake {
  private readonly pullers = new Set<WorkQueuePuller>();

  constructor(private readonly deps: WorkIntakeDeps) {}

  /**
   * After a reconnect the server may not know this worker's open pull requests (it restarted): they
   * are forgotten and asked for again at once, instead of waiting out their expiry.
   */
  reconnected(): void {
    for (const puller of this.pullers) puller.abandonAll();
  }

  /**
   * The work-queue loop of one tag. It asks only for free slots (capacity − running − already asked
   * for), so this worker holds no task it cannot start: an idle worker gets the next one, a busy one
   * asks for nothing. It tops up once half of what it asked for has arrived, so a steady stream of
   * tasks costs one pull request per few tasks. Ends when the worker drains.
   */
  async pull(tag: string): Promise<void> {
    const { slots } = this.deps;
    const share = Math.max(1, Math.floor(slots.capacity / Math.max(1, this.deps.tagCount)));
    const batch = Math.min(MAX_PULL_BATCH, share);
    let wake: (() => void) | undefined;
    const nudge = () => wake?.();
    const puller = new WorkQueuePuller(this.deps.nc, workConsumerName(tag), {
      onItem: (item) => {
        this.take(item, tag);
        nudge();
      },
      onSettled: nudge,
    });
    this.pullers.add(puller);
    const unwatch = slots.onRelease(nudge);
    try {
      while (!this.deps.draining()) {
        const free = slots.capacity - slots.busy - puller.outstanding;
        if (!this.deps.paused?.() && !puller.paused && puller.outstanding <= batch / 2 && free > 0)
          puller.pull(Math.min(free, batch - puller.outstanding));
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, IDLE_CHECK_MS).unref();
        });
        wake = undefined;
      }
    } finally {
      unwatch();
      this.pullers.delete(puller);
      puller.close();
    }
  }

  /**
   * Runs one pulled announcement, keeping its message in progress until the result is decided. It
   * was asked for with a free slot; if a direct task (A2A, MCP) took that slot in the meantime, it
   * waits for the next one, in order.
   */
  private take(item: WorkItem, tag: string): void {
    const checked = validateEvent(item.body);
    const event = checked.ok && checked.value.type === 'amf.task.announce' ? checked.value : undefined;
    // Only the coordinator's reply subject for this task is honoured (docs/decisions.md #8); another is
    // ignored.
    const parsed = event && parseAnnouncement(event.data.payload, { otherReplySubject: 'ignore' });
    if (!event || !parsed?.ok) {
      item.term();
      return;
    }
    const { payload: p, replySubject: reply } = parsed;
    // Re-offered for another worker than this one (its claim was refused, or its handler ran past
    // its timeout), or this agent is disabled: passed on, after a pause so that another worker's
    // pull takes it.
    if (item.notFor.includes(this.deps.agentId) || this.deps.paused?.()) {
      item.nak(NOT_FOR_ME_DELAY_MS);
      return;
    }
    const messages: ChatMessage[] = p.messages ?? [{ role: 'user', content: p.task }];
    const keepAlive = setInterval(() => item.working(), WORK_PROGRESS_MS);
    keepAlive.unref();
    void this.deps
      .run(
        {
          taskId: p.task_id,
          traceId: event.amftraceid ?? p.task_id,
          tag,
          text: p.task,
          messages,
          stream: p.stream === true,
          // A redelivered message (its worker died holding it) is a further attempt.
          attempt: (p.attempt ?? 1) + item.deliveryCount - 1,
          ...(p.input ? { input: p.input } : {}),
          ...(typeof p.message_id === 'string' ? { messageId: p.message_id } : {}),
        },
        {
          origin: 'mesh',
          ...(reply ? { replySubject: reply } : {}),
          ...(item.offer !== undefined ? { offer: item.offer } : {}),
        },
      )
      .then((outcome) => {
        clearInterval(keepAlive);
        if (!outcome.ok && outcome.code === 'draining') item.nak();
        else item.ack();
      });
  }
}
