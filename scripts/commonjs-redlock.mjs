// Runs after tsup (npm run build). Gives fencekit/compat/redlock's CommonJS entry the shape of
// redlock's own: module.exports is the Redlock class (v4: `const Redlock = require('redlock')`),
// and every export of the ESM entry is a property of it, `default` included (v5's CJS build is
// `require('redlock').default`). The ESM entry keeps its default and named exports unchanged.
// tsup cannot do it: its cjsInterop only rewrites an entry whose one export is the default.
import { readFileSync, writeFileSync } from 'node:fs';

const dist = new URL('../dist/compat/', import.meta.url);
const code = new URL('redlock.cjs', dist);
const types = new URL('redlock.d.cts', dist);

/** Replaces the one match of pattern; a build whose output no longer matches fails here, loudly. */
function replaceOnce(text, pattern, replacement, file) {
  const matches = text.match(new RegExp(pattern.source, `${pattern.flags.replace('g', '')}g`)) ?? [];
  if (matches.length !== 1) {
    throw new Error(`${file.pathname}: expected one match of ${pattern}, found ${matches.length}`);
  }
  return text.replace(pattern, replacement);
}

// The JavaScript: after tsup's `exports.X = …` lines, the class becomes module.exports with those
// exports copied onto it (__esModule is not enumerable, so it is not copied: a default import
// through esModuleInterop gets the class itself, the same as `.default`).
const js = readFileSync(code, 'utf8');
if (js.includes('module.exports =')) throw new Error(`${code.pathname}: already rewritten`);
writeFileSync(
  code,
  replaceOnce(
    js,
    /^(\/\/# sourceMappingURL=redlock\.cjs\.map)$/m,
    'module.exports = Object.assign(exports.Redlock, exports);\n$1',
    code,
  ),
);

// The declarations: `export =` the class, merged with a namespace that exports the rest. The
// class's static members that are also exports (Lock, LockError) move into the namespace, which
// is where TypeScript looks for both meanings (`new Redlock.Lock…`, `let lock: Redlock.Lock`).
let dts = readFileSync(types, 'utf8');
const exportList = /^export \{([^}]*)\};$/m.exec(dts)?.[1];
if (!exportList) throw new Error(`${types.pathname}: no export list`);
const exported = exportList.split(',').map((name) => name.trim().replace(/^type /, ''));
for (const name of exported) {
  dts = dts.replace(new RegExp(`^ +static readonly ${name}: typeof ${name};\\n`, 'm'), '');
}
dts = replaceOnce(
  dts,
  /^export \{([^}]*)\};$/m,
  '// CommonJS, as redlock is: the module is the class, and the other exports are its properties.\n' +
    'declare namespace Redlock {\n    export {$1};\n}\nexport = Redlock;',
  types,
);
writeFileSync(types, dts);
