// Types of curator-java.mjs, for the TypeScript tests that use it.
export declare const CURATOR_JARS: string[];
export declare function curatorMissing(): string | undefined;
export declare function compileAgainstCurator(
  sourceFile: string,
): Promise<{ classpath: string; remove: () => Promise<void> }>;
export interface Harness {
  readonly pid: number | undefined;
  /** The error the harness's exit gave, once it has exited. */
  readonly ended: Error | undefined;
  /** Writes one line to the harness's standard input. */
  send(line: string): void;
  close(): Promise<void>;
}
export declare function startHarness(
  sourceFile: string,
  className: string,
  args: string[],
  handlers: { onLine: (line: string) => void; onExit?: (error: Error) => void },
): Promise<Harness>;
