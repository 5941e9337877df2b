import type { TortureEvent } from './history.js';
import { HolderFaults } from './holder-faults.js';
import { StallSwitch } from './stall.js';
import { runWorker, type WorkerConfig } from './worker.js';

// A forked worker process: gets its config from the runner, streams events back over IPC, and
// stops (closing its provider) when told to or when the runner goes away.
const stop = new AbortController();
const stalls = new StallSwitch();
const holder = new HolderFaults();
process.on('disconnect', () => stop.abort());
type Message =
  | { type: 'start'; config: WorkerConfig }
  | { type: 'stop' }
  | { type: 'stall'; ms: number }
  | { type: 'freeze'; frozen: boolean }
  | { type: 'crash' };
process.on('message', (message: Message) => {
  if (message.type === 'stop') {
    stop.abort();
    return;
  }
  if (message.type === 'stall') {
    stalls.arm(message.ms);
    return;
  }
  if (message.type === 'freeze') {
    holder.freeze(message.frozen);
    return;
  }
  if (message.type === 'crash') {
    holder.crash();
    return;
  }
  const emit = (event: TortureEvent) => {
    if (process.connected) process.send?.(event);
  };
  runWorker(message.config, emit, stop.signal, undefined, stalls, holder).then(
    () => process.disconnect(),
    (error: unknown) => {
      emit({
        type: 'crash',
        t: Number(process.hrtime.bigint()) / 1e6,
        worker: message.config.id,
        detail: String(error),
      });
      process.exitCode = 1;
      process.disconnect();
    },
  );
});
