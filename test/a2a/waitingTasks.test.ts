/**
 * The entries of the waiting-tasks bucket (src/protocols/a2a/waitingTasks.ts) are read back by the
 * next coordinator run: only one of the right shape is taken over; anything else (an older or
 * foreign writer, a damaged value) is refused and dropped. The bucket itself, with a real restart,
 * is tested in inputAcrossRestart.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { isWaitingTask, type WaitingTask } from '../../src/protocols/a2a/waitingTasks.js';

const meshTaskId = '6f1c1f4e-4a57-4d0e-9a86-2f7c4b1a9d21';

const entry: WaitingTask = {
  task: { id: meshTaskId, contextId: 'c1', history: [] },
  meshTaskId,
  announce: {
    type: 'amf.task.announce',
    data: { payload: { task_id: meshTaskId } },
  } as unknown as WaitingTask['announce'],
  claimedBy: 'spiffe://local/worker/asker',
  attempt: 1,
  tag: 'ask',
  routedVia: 'metadata',
  inputDeadline: Date.parse('2030-01-01T00:00:00Z'),
  owner: 'host:/data',
};

describe('isWaitingTask', () => {
  it('takes an entry as the coordinator writes it', () => {
    expect(isWaitingTask(JSON.parse(JSON.stringify(entry)))).toBe(true);
  });

  it.each([
    ['no task', { ...entry, task: null }],
    ['an announcement of another task', { ...entry, meshTaskId: 'other' }],
    ['another event type', { ...entry, announce: { ...entry.announce, type: 'amf.task.claim' } }],
    ['no holder', { ...entry, claimedBy: undefined }],
    ['a fractional attempt', { ...entry, attempt: 1.5 }],
    ['no deadline', { ...entry, inputDeadline: 'tomorrow' }],
    ['an endless deadline', { ...entry, inputDeadline: Number.POSITIVE_INFINITY }],
    ['no owner', { ...entry, owner: undefined }],
    ['not an object', 'text'],
  ])('refuses %s', (_what, value) => {
    expect(isWaitingTask(value)).toBe(false);
  });
});
