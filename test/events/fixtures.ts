/** Shared builders for the events tests: a fresh valid event per call, so no test sees another's edits. */
import { randomUUID } from 'node:crypto';
import { createEvent, type AmfEvent, type EventSender } from '../../src/events/cloudEvent.js';
import type { AmfEventType } from '../../src/events/eventTypes.js';

export const SPECIALIST: EventSender = {
  identity: 'spiffe://local/specialist/7f0c1e9a-1111-4c1e-9d1e-3f2a1b0c9d8e',
  source: 'spiffe://local/specialist/7f0c1e9a-1111-4c1e-9d1e-3f2a1b0c9d8e',
  role: 'specialist',
  trustDomain: 'local',
};

/** A valid event of `type` from createEvent, with a task id so every optional AMF extension is set. */
export function validEvent(type: AmfEventType = 'amf.task.progress'): AmfEvent {
  return createEvent({
    type,
    sender: SPECIALIST,
    payload: { step: 1, note: 'half way' },
    taskId: randomUUID(),
    parentId: randomUUID(),
    confidence: 0.85,
    artifactRefs: ['nats://amf/artifacts/1'],
  });
}

/** A valid event as a plain mutable record, for tests that break one field at a time. */
export function validRecord(): Record<string, unknown> {
  return structuredClone(validEvent()) as unknown as Record<string, unknown>;
}
