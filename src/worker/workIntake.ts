/**
 * A worker's intake from the work queue (stream AMF_WORK): per tag, take a slot, then pull one
 * announcement, run it through the worker's one run path and keep its message in progress until the
 * result is stored. NATS outages only make a pull come back empty.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { parseAnnouncement } from '../events/announcement.js';
import type { ChatMessage } from '../events/payloads.js';
import { workConsumerName } from '../events/subjects.js';
import { validateEvent } from '../events/validateEvent.js';
import { WorkQueueReader, type WorkItem } from '../fabric/workQueue.js';
import type { LocalOutcome } from './invokeHandler.js';
import type { RunTaskOptions, TaskInput } from './meshWorker.js';
import type { TaskSlots } from './taskSlots.js';

/** How long one pull waits for a task before the loop checks for a drain and asks again. */
const PULL_WAIT_MS = 2_000;
/** In-progress signals keep a running task's message from redelivery (the consumer's ack wait is 30 s). */
const WORK_PROGRESS_MS = 10_000;

export interface WorkIntakeDeps {
  nc: NatsConnection;
  slots: TaskSlots;
  draining: () => boolean;
  run: (task: TaskInput, options: RunTaskOptions) => Promise<LocalOutcome>;
}

export class WorkIntake {
  constructor(private readonly deps: WorkIntakeDeps) {}

  /**
   * The work-queue loop of one tag: take a slot first, then pull one announcement, so this worker
   * only ever holds tasks it can start at once and an idle worker gets the next one. NATS outages
   * just make `next()` come back empty; the loop ends when the worker drains.
   */
  async pull(tag: string): Promise<void> {
    const reader = new WorkQueueReader(this.deps.nc, workConsumerName(tag));
    while (!this.deps.draining()) {
      const release = await this.deps.slots.acquire();
      if (this.deps.draining()) {
        release();
        break;
      }
      const item = await reader.next(PULL_WAIT_MS);
      if (item) this.take(item, tag, release);
      else release();
    }
  }

  /** Runs one pulled announcement, keeping its message in progress until the result is stored. */
  private take(item: WorkItem, tag: string, slot: () => void): void {
    const checked = validateEvent(item.body);
    const event = checked.ok && checked.value.type === 'amf.task.announce' ? checked.value : undefined;
    // Only the coordinator's reply subject for this task is honoured (LOCKED #8); another is ignored.
    const parsed = event && parseAnnouncement(event.data.payload, { otherReplySubject: 'ignore' });
    if (!event || !parsed?.ok) {
      item.term();
      slot();
      return;
    }
    const { payload: p, replySubject: reply } = parsed;
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
        { origin: 'mesh', slot, ...(reply ? { replySubject: reply } : {}) },
      )
      .then((outcome) => {
        clearInterval(keepAlive);
        if (!outcome.ok && outcome.code === 'draining') item.nak();
        else item.ack();
      });
  }
}
