import { register } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { LIBRARY_ACTIVE, LIBRARY_ENV } from './library-env.js';

// Loaded with `node --import` before any other module (the runner re-executes itself so; forked
// workers inherit the flag and the environment): from here on 'fencekit' and 'fencekit/*' resolve
// as the chosen checkout's own package would (its exports map, its dist/).
const root = process.env[LIBRARY_ENV];
if (root) {
  register('./library-resolve.js', import.meta.url, {
    data: { packageJson: pathToFileURL(resolve(root, 'package.json')).href },
  });
  (globalThis as Record<symbol, unknown>)[LIBRARY_ACTIVE] = resolve(root);
}
