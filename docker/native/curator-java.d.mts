// Types of curator-java.mjs, for the TypeScript tests that use it.
export declare const CURATOR_JARS: string[];
export declare function curatorMissing(): string | undefined;
export declare function compileAgainstCurator(
  sourceFile: string,
): Promise<{ classpath: string; remove: () => Promise<void> }>;
