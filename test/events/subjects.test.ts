import { describe, expect, it } from 'vitest';
import { AMF_EVENT_TYPES } from '../../src/events/eventTypes.js';
import {
  announceSubject,
  isCapabilityTag,
  isTaskId,
  isValidSubjectPattern,
  replySubject,
  subjectForType,
  subjectMatches,
  workerQueueGroup,
} from '../../src/events/subjects.js';

describe('subjectMatches', () => {
  it.each([
    ['amf.>', 'amf.task.claim', true],
    ['amf.>', 'amf.task.announce.code-exec', true],
    ['amf.>', 'amf', false],
    ['>', 'amf.task', true],
    ['amf.task.>', 'amf.task', false],
    ['amf.task.>', 'amf.task.claim', true],
    ['amf.task.>', 'amf.result.final', false],
    ['amf.*', 'amf.task', true],
    ['amf.*', 'amf.task.claim', false],
    ['amf.*.claim', 'amf.task.claim', true],
    ['amf.*.claim', 'amf.task.progress', false],
    ['amf.task.announce.*', 'amf.task.announce.code-exec', true],
    ['amf.task.announce.*', 'amf.task.announce', false],
    ['*', 'amf', true],
    ['*', 'amf.task', false],
    ['amf.task.claim', 'amf.task.claim', true],
    ['amf.task.claim', 'amf.task.claimed', false],
    ['amf.task.claim', 'amf.task', false],
    ['amf.task', 'amf.task.claim', false],
  ])('%s matches %s: %s', (pattern, subject, expected) => {
    expect(subjectMatches(pattern, subject)).toBe(expected);
  });
});

describe('isValidSubjectPattern', () => {
  it.each([
    'amf.>',
    '>',
    'amf.task.*',
    'amf.*.claim',
    'amf.task.announce.code-exec',
    'amf.internal.reply.A1_b-2',
  ])('accepts %s', (pattern) => {
    expect(isValidSubjectPattern(pattern)).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['an empty token', 'amf..task'],
    ['a leading dot', '.amf'],
    ['a trailing dot', 'amf.'],
    ['> not last', 'amf.>.task'],
    ['a partial wildcard', 'amf.ta*'],
    ['a partial tail wildcard', 'amf.>x'],
    ['a space', 'amf.task claim'],
    ['over 256 characters', `amf.${'a'.repeat(253)}`],
  ])('refuses %s', (_label, pattern) => {
    expect(isValidSubjectPattern(pattern)).toBe(false);
  });

  it('accepts exactly 256 characters', () => {
    expect(isValidSubjectPattern(`amf.${'a'.repeat(252)}`)).toBe(true);
  });
});

describe('announceSubject', () => {
  it('puts the capability tag after amf.task.announce.', () => {
    expect(announceSubject('code-exec')).toBe('amf.task.announce.code-exec');
    expect(announceSubject('a'.repeat(64))).toBe(`amf.task.announce.${'a'.repeat(64)}`);
  });

  it.each([
    ['a dot (would add a token)', 'a.b'],
    ['the * wildcard', '*'],
    ['the > wildcard', '>'],
    ['uppercase', 'Code'],
    ['a space', 'code exec'],
    ['an underscore', 'code_exec'],
    ['the empty tag', ''],
    ['65 characters', 'a'.repeat(65)],
  ])('refuses a tag with %s', (_label, tag) => {
    expect(() => announceSubject(tag)).toThrow(/invalid capability tag/);
    expect(isCapabilityTag(tag)).toBe(false);
  });
});

describe('other subjects', () => {
  it('every type is its own subject, except an announcement with a tag', () => {
    for (const type of AMF_EVENT_TYPES) expect(subjectForType(type)).toBe(type);
    expect(subjectForType('amf.task.announce', 'pdf-parse')).toBe('amf.task.announce.pdf-parse');
    expect(subjectForType('amf.task.claim', 'pdf-parse')).toBe('amf.task.claim');
    expect(() => subjectForType('amf.task.announce', 'a.>')).toThrow(/invalid capability tag/);
  });

  it('workers of a tag share one queue group', () => {
    expect(workerQueueGroup('pdf-parse')).toBe('workers.pdf-parse');
  });

  it('a reply subject names one task and cannot be widened', () => {
    const taskId = '0b5e4a4c-56a0-4c7e-9a44-2b1f4b6f8f10';
    expect(replySubject(taskId)).toBe(`amf.internal.reply.${taskId}`);
    expect(isTaskId(taskId)).toBe(true);
    for (const bad of ['a.b', '*', '>', '', 'a b', 'x'.repeat(65)]) {
      expect(() => replySubject(bad)).toThrow(/invalid task id/);
    }
  });
});
