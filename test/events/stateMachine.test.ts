import { describe, expect, it } from 'vitest';
import {
  TERMINAL_STATES,
  isTerminal,
  nextTaskState,
  type TaskState,
  type TaskTransition,
} from '../../src/events/taskStateMachine.js';

const STATES: readonly TaskState[] = ['announced', 'claimed', 'blocked', 'completed', 'failed', 'expired'];
const TRANSITIONS: readonly TaskTransition[] = [
  'amf.task.claim',
  'amf.task.progress',
  'amf.task.blocked',
  'amf.task.delegate',
  'amf.result.partial',
  'amf.result.final',
  'amf.policy.deny',
  'expire',
  'reannounce',
  'fail',
];

/**
 * Every (state, transition) pair: the resulting state, or null when the transition is invalid.
 * Rows cite notes/amf.md section 4 where it has one; the rest are the coordinator's own rules.
 */
const TABLE: Record<TaskState, Record<TaskTransition, TaskState | null>> = {
  announced: {
    'amf.task.claim': 'claimed', // §4: claim, announced → claimed
    'amf.task.progress': null,
    'amf.task.blocked': null,
    'amf.task.delegate': null,
    'amf.result.partial': null,
    'amf.result.final': null,
    'amf.policy.deny': 'failed', // §4: deny, any → failed
    expire: 'expired', // §4: announced → expired when no claim within the TTL
    reannounce: 'announced', // LOCKED #6: TTL retry republishes the task
    fail: 'failed', // §4: any → failed on worker error
  },
  claimed: {
    'amf.task.claim': null, // a second claim is a duplicate (LOCKED #5: policy warning)
    'amf.task.progress': 'claimed', // §4: progress, claimed → claimed
    'amf.task.blocked': 'blocked', // §4: blocked, claimed → blocked
    // §4: delegate, claimed → announced *with a new task_id*: the delegated child is a new task
    // that starts announced; the parent stays claimed by the delegating worker.
    'amf.task.delegate': 'claimed',
    'amf.result.partial': 'claimed', // §4: partial, claimed → claimed
    'amf.result.final': 'completed', // §4: final, claimed → completed
    'amf.policy.deny': 'failed', // §4
    expire: null, // only an unclaimed task expires; a stuck claim is the watchdog's `fail`
    reannounce: 'announced', // watchdog re-announcement
    fail: 'failed', // §4 / LOCKED #6 watchdog
  },
  blocked: {
    'amf.task.claim': 'claimed', // §4: claim, blocked → claimed (re-claim)
    'amf.task.progress': null,
    'amf.task.blocked': null,
    'amf.task.delegate': null,
    'amf.result.partial': null,
    'amf.result.final': null,
    'amf.policy.deny': 'failed', // §4
    expire: null,
    reannounce: 'announced',
    fail: 'failed', // §4
  },
  // Terminal states accept nothing: "any → failed" is read as any live state, so a completed
  // task can never be turned into a failed one afterwards.
  completed: allInvalid(),
  failed: allInvalid(),
  expired: allInvalid(),
};

function allInvalid(): Record<TaskTransition, null> {
  return Object.fromEntries(TRANSITIONS.map((transition) => [transition, null])) as Record<
    TaskTransition,
    null
  >;
}

const CASES = STATES.flatMap((from) =>
  TRANSITIONS.map((transition) => [from, transition, TABLE[from][transition]] as const),
);

describe('nextTaskState', () => {
  it('the table covers every state × transition pair', () => {
    expect(CASES).toHaveLength(STATES.length * TRANSITIONS.length);
  });

  it.each(CASES.filter(([, , to]) => to !== null))('%s --%s--> %s', (from, transition, to) => {
    expect(nextTaskState(from, transition)).toEqual({ ok: true, state: to });
  });

  it.each(CASES.filter(([, , to]) => to === null))('%s --%s--> rejected', (from, transition) => {
    const result = nextTaskState(from, transition);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      // The reason is what the coordinator puts in its amf.policy.warning: it must name the state.
      expect(result.reason).toContain(from);
    }
  });

  it('never throws, even for a transition outside the type', () => {
    const bogus = 'amf.task.cancel' as TaskTransition;
    expect(nextTaskState('claimed', bogus)).toEqual({
      ok: false,
      reason: 'unknown transition amf.task.cancel',
    });
  });

  it('walks the happy path of section 4: announce, claim, progress, block, re-claim, partial, final', () => {
    const path: TaskTransition[] = [
      'amf.task.claim',
      'amf.task.progress',
      'amf.task.blocked',
      'amf.task.claim',
      'amf.result.partial',
      'amf.result.final',
    ];
    let state: TaskState = 'announced';
    for (const transition of path) {
      const result = nextTaskState(state, transition);
      if (!result.ok) throw new Error(result.reason);
      state = result.state;
    }
    expect(state).toBe('completed');
  });
});

describe('terminal states', () => {
  it.each(STATES)('isTerminal(%s) agrees with TERMINAL_STATES', (state) => {
    expect(isTerminal(state)).toBe(['completed', 'failed', 'expired'].includes(state));
    expect(TERMINAL_STATES.has(state)).toBe(isTerminal(state));
  });
});
