import { defineConfig } from 'vitest/config';

// Each test file starts its own nats-server on a random port, so files run in parallel safely.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
