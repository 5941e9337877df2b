/**
 * The import graph of the package's TypeScript files, and its circles. An edge is every module
 * reference in a file: `import` and `export … from` (type-only ones too), `import x = require()`,
 * `import()` calls (the lazy adapter imports) and `import('…')` types. Specifiers are resolved as
 * the compiler resolves them, under the project's tsconfig, so `./x.js` finds `./x.ts`; references
 * that leave the checked folders (node_modules, node: built-ins) are not edges.
 */

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** Files by path relative to the root, each with the files it references. */
export type ImportGraph = Map<string, Set<string>>;

/** Every .ts file under `folders` of `root`, with the files it references among them. */
export function importGraph(root: string, folders: readonly string[]): ImportGraph {
  const options = compilerOptions(root);
  const files = folders.flatMap((folder) => typeScriptFiles(join(root, folder)));
  const known = new Set(files);
  const cache = ts.createModuleResolutionCache(root, (name) => name, options);
  const graph: ImportGraph = new Map();
  for (const file of files) {
    const targets = new Set<string>();
    for (const specifier of moduleReferences(file)) {
      const target = ts.resolveModuleName(specifier, file, options, ts.sys, cache).resolvedModule
        ?.resolvedFileName;
      if (target !== undefined && known.has(resolve(target))) targets.add(relative(root, resolve(target)));
    }
    graph.set(relative(root, file), targets);
  }
  return graph;
}

/**
 * One circle per group of files that reach each other (a strongly connected component), shown as
 * the shortest path from its first file back to itself: `[a, b, a]`. A file importing itself counts.
 */
export function importCircles(graph: ImportGraph): string[][] {
  return stronglyConnected(graph)
    .filter((group) => group.length > 1 || graph.get(group[0] as string)?.has(group[0] as string))
    .map((group) => shortestCircle(graph, group.sort()));
}

/** The module specifiers `file` references, in any of the forms listed at the top. */
export function moduleReferences(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const specifiers: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
      if (ts.isStringLiteral(node.moduleSpecifier)) specifiers.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const reference = node.moduleReference.expression;
      if (ts.isStringLiteral(reference)) specifiers.push(reference.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [argument] = node.arguments;
      if (argument && ts.isStringLiteralLike(argument)) specifiers.push(argument.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      const literal = node.argument.literal;
      if (ts.isStringLiteral(literal)) specifiers.push(literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return specifiers;
}

function compilerOptions(root: string): ts.CompilerOptions {
  const path = join(root, 'tsconfig.json');
  const { config, error } = ts.readConfigFile(path, ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  return ts.parseJsonConfigFileContent(config, ts.sys, dirname(path)).options;
}

function typeScriptFiles(folder: string): string[] {
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => resolve(folder, name))
    .sort();
}

/** Tarjan's algorithm: the groups of files that reach each other. */
function stronglyConnected(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const lowest = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    lowest.set(file, index.get(file) as number);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        lowest.set(file, Math.min(lowest.get(file) as number, lowest.get(next) as number));
      } else if (onStack.has(next)) {
        lowest.set(file, Math.min(lowest.get(file) as number, index.get(next) as number));
      }
    }
    if (lowest.get(file) !== index.get(file)) return;
    const group: string[] = [];
    for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
      onStack.delete(member);
      group.push(member);
      if (member === file) break;
    }
    groups.push(group);
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return groups;
}

/** Breadth-first within `group`, from its first file back to that file. */
function shortestCircle(graph: ImportGraph, group: string[]): string[] {
  const start = group[0] as string;
  const members = new Set(group);
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let at = queue.shift(); at !== undefined; at = queue.shift()) {
    for (const next of graph.get(at) ?? []) {
      if (!members.has(next)) continue;
      if (next === start) {
        const path = [start];
        for (let step = at; step !== start; step = cameFrom.get(step) as string) path.unshift(step);
        return [start, ...path];
      }
      if (!cameFrom.has(next)) {
        cameFrom.set(next, at);
        queue.push(next);
      }
    }
  }
  return [start, start];
}
