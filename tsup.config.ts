import { readFileSync } from 'node:fs';
import { defineConfig } from 'tsup';

const { version } = JSON.parse(readFileSync(new URL('package.json', import.meta.url), 'utf8')) as {
  version: string;
};

// One bundle per public entry point, each in ESM (.js) and CJS (.cjs) with its .d.ts / .d.cts.
// Backend clients stay external: they are optional peer dependencies the user installs.
// scripts/commonjs-redlock.mjs runs after this build (npm run build) and gives the redlock facade's
// CJS entry redlock's CommonJS shape.
export default defineConfig({
  entry: {
    index: 'src/index.ts',
    testing: 'src/testing/index.ts',
    'provider-kit': 'src/provider-kit.ts',
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
  // src/version.ts: the version is written into both formats, never read from a file at run time.
  define: { __FENCEKIT_VERSION__: JSON.stringify(version) },
});
