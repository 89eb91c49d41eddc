/**
 * What the parts of the task lifecycle (claims, results, retries) share: the fabric, the registry,
 * the notices, the coordinator's sender identity, the clock, the task table and the timers. The
 * lifecycle builds one set and hands it to each part.
 */
import type { EventSender } from '../events/cloudEvent.js';
import type { TaskAgents, TaskFabric, TaskNotices } from './taskRecord.js';
import type { TaskTable } from './taskTable.js';
import type { LifecycleClock, TaskTimers } from './taskTimers.js';

export interface TaskParts {
  fabric: TaskFabric;
  agents: TaskAgents;
  notices: TaskNotices;
  sender: EventSender;
  clock: LifecycleClock;
  table: TaskTable;
  timers: TaskTimers;
}
