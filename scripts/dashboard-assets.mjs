// Copies the dashboard's page (src/cli/dashboard/assets: HTML, one script, one stylesheet) to
// dist/dashboard/, where `fencekit dashboard` serves it from: the page ships as plain files, with no
// build step of its own.
import { cpSync } from 'node:fs';

cpSync(
  new URL('../src/cli/dashboard/assets/', import.meta.url),
  new URL('../dist/dashboard/', import.meta.url),
  {
    recursive: true,
  },
);
