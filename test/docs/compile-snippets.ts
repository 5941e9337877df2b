/**
 * Compiles every documented TypeScript block in one TypeScript program, under the package's own
 * tsconfig (strict), against the built package: a block imports 'fencekit', 'fencekit/redis', …,
 * which resolve to dist/ through the package's self-reference. One program for all blocks keeps
 * the check to a few seconds.
 *
 * Each block becomes a virtual module next to this file (never written to disk). Names a block
 * uses without defining them (the reader's `db`, `reconcile`, …) are declared in
 * snippet-globals.d.ts. Runnable blocks are also emitted as JavaScript, to be run by the test.
 */

import { dirname, join } from 'node:path';
import ts from 'typescript';
import type { CodeBlock } from './markdown.js';

export interface CompiledSnippet {
  block: CodeBlock;
  /** Problems found by the compiler, each as "README.md:52: message". */
  errors: string[];
  /** The emitted JavaScript, for runnable blocks. */
  javascript?: string;
}

export function compileSnippets(root: string, blocks: CodeBlock[]): CompiledSnippet[] {
  const here = join(root, 'test', 'docs');
  const sources = new Map<string, CodeBlock>();
  blocks.forEach((block, index) => {
    sources.set(join(here, `__snippet_${index}.ts`), block);
  });
  const options = packageCompilerOptions(root);
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const readFile = host.readFile.bind(host);
  host.fileExists = (path) => sources.has(path) || fileExists(path);
  host.readFile = (path) => {
    const block = sources.get(path);
    return block ? asModule(block.code) : readFile(path);
  };
  host.getSourceFile = (path, language, onError, create) => {
    const block = sources.get(path);
    if (!block) return getSourceFile(path, language, onError, create);
    return ts.createSourceFile(path, asModule(block.code), language, true);
  };
  const globals = join(here, 'snippet-globals.d.ts');
  const program = ts.createProgram({ rootNames: [globals, ...sources.keys()], options, host });
  const globalErrors = ts.getPreEmitDiagnostics(program, program.getSourceFile(globals));
  if (globalErrors.length > 0) throw new Error(format(globalErrors, undefined).join('\n'));

  return [...sources].map(([path, block]) => {
    const file = program.getSourceFile(path);
    if (!file) return { block, errors: [`${block.file}:${block.line}: not compiled`] };
    const errors = format(ts.getPreEmitDiagnostics(program, file), block);
    if (block.marker !== 'runnable' || errors.length > 0) return { block, errors };
    let javascript = '';
    program.emit(file, (name, text) => {
      if (name.endsWith('.js')) javascript = text;
    });
    return { block, errors, javascript };
  });
}

/** The package's tsconfig.json, emitting JavaScript (in memory) instead of nothing. */
function packageCompilerOptions(root: string): ts.CompilerOptions {
  const configPath = join(root, 'tsconfig.json');
  const config = ts.readConfigFile(configPath, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, dirname(configPath));
  return { ...parsed.options, noEmit: false, declaration: false, sourceMap: false, outDir: undefined };
}

/** A block without imports or exports would be a script sharing one global scope with the others. */
function asModule(code: string): string {
  return /^\s*(import|export)\s/m.test(code) ? code : `${code}\nexport {};\n`;
}

function format(diagnostics: readonly ts.Diagnostic[], block: CodeBlock | undefined): string[] {
  return diagnostics.map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (!diagnostic.file || diagnostic.start === undefined) return message;
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const where = block ? `${block.file}:${block.line + line}` : `${diagnostic.file.fileName}:${line + 1}`;
    return `${where}: ${message}`;
  });
}
