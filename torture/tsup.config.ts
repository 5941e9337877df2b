import { defineConfig } from 'tsup';

// The torture runner and its worker, built next to the package they test (which they load by
// name, through its exports map, like any user). Not shipped: .tmp is outside `files`.
export default defineConfig({
  entry: {
    main: 'torture/main.ts',
    'worker-main': 'torture/worker-main.ts',
    // The command the cli workload runs under `fencekit lock`.
    'cli-group': 'torture/workloads/cli-group.ts',
    library: 'torture/library.ts',
    'library-resolve': 'torture/library-resolve.ts',
  },
  outDir: '.tmp/torture',
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  clean: true,
  dts: false,
  splitting: false,
  // Every package stays a package (fencekit itself, backend clients, testcontainers …).
  skipNodeModulesBundle: true,
  external: ['fencekit', /^fencekit\//],
});
