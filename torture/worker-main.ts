import type { TortureEvent } from './history.js';
import { runWorker, type WorkerConfig } from './worker.js';

// A forked worker process: gets its config from the runner, streams events back over IPC, and
// stops (closing its provider) when told to or when the runner goes away.
const stop = new AbortController();
process.on('disconnect', () => stop.abort());
process.on('message', (message: { type: 'start'; config: WorkerConfig } | { type: 'stop' }) => {
  if (message.type === 'stop') {
    stop.abort();
    return;
  }
  const emit = (event: TortureEvent) => {
    if (process.connected) process.send?.(event);
  };
  runWorker(message.config, emit, stop.signal).then(
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
