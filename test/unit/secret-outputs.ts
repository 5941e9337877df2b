import { inspect } from 'node:util';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import type { ConnectOptions, LockProvider } from '../../src/index.js';

/** A reader that exports nothing: the test collects what the SDK aggregated. */
class CollectingReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

/** Everything a caller can see of a provider: thrown errors (whole), events, log lines, metrics. */
export class Outputs {
  readonly texts: string[] = [];
  readonly codes: string[] = [];
  readonly #reader = new CollectingReader();
  readonly meterProvider = new MeterProvider({ readers: [this.#reader] });

  error(error: unknown): void {
    this.codes.push(String((error as { code?: unknown })?.code));
    this.texts.push(
      String(error),
      (error as Error)?.message ?? '',
      (error as Error)?.stack ?? '',
      inspect(error, { depth: 10, showHidden: true }),
    );
    // Each cause on its own too, as a caller that logs `err.cause` sees it.
    let cause = (error as { cause?: unknown } | null)?.cause;
    for (let depth = 0; cause !== undefined && depth < 10; depth++) {
      this.texts.push(String(cause), inspect(cause, { depth: 10, showHidden: true }));
      cause = (cause as { cause?: unknown } | null)?.cause;
    }
  }

  record(what: string, value: unknown): void {
    this.texts.push(`${what} ${inspect(value, { depth: 10, showHidden: true })}`);
  }

  options(): ConnectOptions {
    const line =
      (level: string) =>
      (...args: unknown[]) =>
        this.record(`log ${level}`, args);
    return {
      callTimeoutMs: 300,
      waitMs: 300,
      sessionTimeoutMs: 1_000,
      logger: { info: line('info'), warn: line('warn'), error: line('error') },
      meterProvider: this.meterProvider,
    };
  }

  listen(provider: LockProvider): void {
    for (const event of ['grant', 'loss', 'renew-failed', 'release', 'force-release'] as const)
      provider.on?.(event, (payload: unknown) => this.record(`event ${event}`, payload));
  }

  async collectMetrics(): Promise<void> {
    const { resourceMetrics } = await this.#reader.collect();
    this.record('metrics', resourceMetrics.scopeMetrics);
  }

  all(): string {
    return this.texts.join('\n');
  }
}
