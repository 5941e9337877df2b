import { resolve } from 'node:path';
import { curatorMissing, startHarness } from '../../docker/native/curator-java.mjs';

export { curatorMissing };

export interface Curator {
  /** Sends "<verb> <args>" and resolves with the harness's answer ("ok", "granted", …). */
  call(command: string): Promise<string>;
  close(): Promise<void>;
}

/** Compiles CuratorHarness.java into a temp dir and starts it against connectString. */
export async function startCurator(connectString: string): Promise<Curator> {
  const pending = new Map<string, { resolve: (answer: string) => void; reject: (error: Error) => void }>();
  const harness = await startHarness(
    resolve(import.meta.dirname, 'CuratorHarness.java'),
    'CuratorHarness',
    [connectString],
    {
      onLine: (line) => {
        const space = line.indexOf(' ');
        const id = line.slice(0, space);
        pending.get(id)?.resolve(line.slice(space + 1));
        pending.delete(id);
      },
      onExit: (ended) => {
        for (const waiter of pending.values()) waiter.reject(ended);
        pending.clear();
      },
    },
  );
  let next = 0;
  return {
    call(command) {
      if (harness.ended) return Promise.reject(harness.ended);
      const id = String(next++);
      return new Promise((resolveAnswer, reject) => {
        pending.set(id, { resolve: resolveAnswer, reject });
        harness.send(`${id} ${command}`);
      });
    },
    close: () => harness.close(),
  };
}

export interface CuratorHolder {
  /** Every line the holder printed ("granted <session>", "state SUSPENDED" …), with when it came (performance.now()). */
  readonly events: { at: number; line: string }[];
  /** Resolves with the holder's session id (hex) once its InterProcessMutex is granted. */
  readonly granted: Promise<string>;
  release(): void;
  close(): Promise<void>;
}

/** Starts CuratorHolder.java: one Curator client that takes the InterProcessMutex at `path` and reports its connection states. */
export async function startCuratorHolder(
  connectString: string,
  path: string,
  sessionMs: number,
): Promise<CuratorHolder> {
  const events: { at: number; line: string }[] = [];
  let onGranted: (session: string) => void = () => undefined;
  const granted = new Promise<string>((ok) => {
    onGranted = ok;
  });
  const harness = await startHarness(
    resolve(import.meta.dirname, 'CuratorHolder.java'),
    'CuratorHolder',
    [connectString, path, String(sessionMs)],
    {
      onLine: (line) => {
        events.push({ at: performance.now(), line });
        if (line.startsWith('granted ')) onGranted(line.slice('granted '.length));
      },
    },
  );
  return {
    events,
    granted,
    release: () => harness.send('release'),
    close: () => harness.close(),
  };
}
