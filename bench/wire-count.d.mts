// Types of wire-count.mjs, for the tests that count calls with it.
export interface WireCounts {
  /** Requests by op name (create2, getChildren, exists, delete, multi, …). */
  requests: Record<string, number>;
  replies: number;
  /** Bursts of requests sent after the last reply. */
  roundTrips: number;
}
export interface WireCounter {
  connectString: string;
  /** Counts since the last take(), and starts counting afresh. */
  take(): WireCounts;
  close(): Promise<void>;
}
export function startWireCounter(target: string): Promise<WireCounter>;
