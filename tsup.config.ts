import { defineConfig } from 'tsup';

// One bundle per public entry point, each in ESM (.js) and CJS (.cjs) with its .d.ts / .d.cts.
// Backend clients stay external: they are optional peer dependencies the user installs.
export default defineConfig({
  entry: {
    index: 'src/index.ts',
    testing: 'src/testing/index.ts',
    cli: 'src/cli/main.ts',
    etcd: 'adapters/etcd/index.ts',
    zookeeper: 'adapters/zookeeper/index.ts',
    redis: 'adapters/redis/index.ts',
    postgres: 'adapters/postgres/index.ts',
    'compat/redlock': 'src/compat/redlock/index.ts',
    'compat/redis-semaphore': 'src/compat/redis-semaphore/index.ts',
    idempotency: 'src/idempotency/index.ts',
  },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'node20',
  splitting: true,
  external: ['etcd3', 'ioredis', 'pg'],
});
