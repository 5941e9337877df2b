import type { Attributes } from '@opentelemetry/api';
import { DataPointType, MeterProvider, type MetricData, MetricReader } from '@opentelemetry/sdk-metrics';

/** A reader that exports nothing: tests call collect() and look at what the SDK aggregated. */
class CollectingReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

export interface MetricPoint {
  attributes: Attributes;
  /** Counters and up-down counters: the sum; histograms: the number of recordings. */
  value: number;
  /** Histograms only: the sum of the recorded values. */
  sum?: number;
}

export interface Snapshot {
  descriptor(name: string): MetricData['descriptor'] | undefined;
  points(name: string): MetricPoint[];
  /** Total over the points whose attributes include `match`. */
  total(name: string, match?: Attributes): number;
}

/** A MeterProvider of its own (never the global one) and what it has collected so far. */
export function testMetrics(): { meterProvider: MeterProvider; collect(): Promise<Snapshot> } {
  const reader = new CollectingReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    meterProvider,
    async collect() {
      const { resourceMetrics, errors } = await reader.collect();
      if (errors.length > 0) throw new AggregateError(errors, 'metric collection failed');
      const all = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
      const byName = new Map(all.map((metric) => [metric.descriptor.name, metric]));
      const points = (name: string): MetricPoint[] => {
        const metric = byName.get(name);
        if (!metric) return [];
        return metric.dataPoints.map((point) => {
          if (metric.dataPointType === DataPointType.HISTOGRAM) {
            const value = point.value as { count: number; sum?: number };
            return { attributes: point.attributes, value: value.count, sum: value.sum ?? 0 };
          }
          return { attributes: point.attributes, value: point.value as number };
        });
      };
      return {
        descriptor: (name) => byName.get(name)?.descriptor,
        points,
        total(name, match = {}) {
          return points(name)
            .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
            .reduce((sum, p) => sum + p.value, 0);
        },
      };
    },
  };
}
