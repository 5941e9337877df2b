/**
 * The package's version. The build writes it in (tsup's `define`, from package.json), so the ESM
 * and the CJS bundles carry it without reading a file at run time: neither has a path to
 * package.json that holds in both formats. Code run from source without that define (the torture
 * build) reads '0.0.0-source'.
 */
declare const __FENCEKIT_VERSION__: string | undefined;

export const VERSION: string =
  typeof __FENCEKIT_VERSION__ === 'string' ? __FENCEKIT_VERSION__ : '0.0.0-source';
