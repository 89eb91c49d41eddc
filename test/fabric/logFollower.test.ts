// The log follower on real files: only what is written after it starts, whole lines only, and it
// keeps following across truncation, rotation (rename + a new file) and a file that appears late.
import { appendFile, mkdtemp, rename, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followLog, type LogFollower } from '../../src/fabric/logFollower.js';

describe('followLog', () => {
  let dir: string;
  const followers: LogFollower[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'amf-follow-'));
  });
  afterAll(async () => {
    for (const f of followers) f.close();
    await rm(dir, { recursive: true, force: true });
  });

  const follow = async (
    path: string,
    extra: { maxLineBytes?: number; maxBytesPerPoll?: number } = {},
  ): Promise<{ f: LogFollower; lines: string[]; problems: string[] }> => {
    const lines: string[] = [];
    const problems: string[] = [];
    // A poll interval far beyond the test: every read is the test's own poll().
    const f = await followLog({
      path,
      onLine: (l) => lines.push(l),
      onProblem: (p) => problems.push(p),
      pollMs: 3_600_000,
      ...extra,
    });
    followers.push(f);
    return { f, lines, problems };
  };

  it('reports only lines written after it started, each once, and holds a partial line back', async () => {
    const path = join(dir, 'a.log');
    await writeFile(path, 'old line\n');
    const { f, lines } = await follow(path);
    await appendFile(path, 'first\nsecond\nthi');
    await f.poll();
    expect(lines).toEqual(['first', 'second']);
    await appendFile(path, 'rd\n');
    await f.poll();
    await f.poll();
    expect(lines).toEqual(['first', 'second', 'third']);
  });

  it('starts over on a truncated file and reopens a rotated one', async () => {
    const path = join(dir, 'b.log');
    await writeFile(path, 'x\n');
    const { f, lines } = await follow(path);
    await appendFile(path, 'before truncation\n');
    await f.poll();
    await truncate(path, 0);
    await appendFile(path, 'after\n');
    await f.poll();
    await rename(path, `${path}.1`);
    await writeFile(path, 'rotated\n');
    await f.poll();
    expect(lines).toEqual(['before truncation', 'after', 'rotated']);
  });

  it('waits for a file that does not exist yet, saying so once, then reads it from its start', async () => {
    const path = join(dir, 'late.log');
    const { f, lines, problems } = await follow(path);
    await f.poll();
    await f.poll();
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('ENOENT');
    await writeFile(path, 'hello\n');
    await f.poll();
    expect(lines).toEqual(['hello']);
  });

  it('cuts an overlong line and reads a large burst over several polls', async () => {
    const path = join(dir, 'big.log');
    await writeFile(path, '');
    const { f, lines } = await follow(path, { maxLineBytes: 10, maxBytesPerPoll: 8 });
    await appendFile(path, `${'y'.repeat(25)}\nshort\n`);
    for (let i = 0; i < 6; i++) await f.poll();
    expect(lines).toEqual(['y'.repeat(10), 'short']);
  });
});
