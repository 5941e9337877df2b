import type { CompleteRequest, CompleteResult, RecordBackend } from 'fencekit/idempotency';

/**
 * The control run's records (--unsafe unfenced-completion): a completion the store refuses for its
 * token is sent again under the token that holds the record now, so a run that was taken over still
 * stores its result, as a store without a fence on completion would.
 */
export function unfencedCompletion(records: RecordBackend): RecordBackend {
  return new Proxy(records, {
    get(target, property) {
      if (property === 'complete') {
        return async (request: CompleteRequest) => {
          const done: CompleteResult = await target.complete(request);
          if (done.stored || done.current === null) return done;
          return target.complete({ ...request, token: done.current });
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * memory:// workers run in the runner's process, so the nemesis cannot SIGKILL them or cut their
 * sockets. These records stand in for the network between a worker and the shared memory store: a
 * partition holds each call until it heals (then delivers it, as the proxies deliver held bytes),
 * and a crash leaves every call unanswered, so nothing is renewed or completed any more.
 */
export class SwitchableRecords implements RecordBackend {
  readonly name: RecordBackend['name'];
  #healed: Promise<void> | undefined;
  #heal: (() => void) | undefined;
  #crashed = false;

  constructor(private readonly records: RecordBackend) {
    this.name = records.name;
  }

  /** The handle the worker pool drives (the shape of MemoryLockProvider's `simulate`). */
  readonly simulate = {
    partition: (cut: boolean): void => {
      if (cut) {
        this.#healed ??= new Promise((resolve) => {
          this.#heal = resolve;
        });
        return;
      }
      this.#heal?.();
      this.#healed = undefined;
    },
    crash: (): void => {
      this.#crashed = true;
    },
  };

  /** Waits while the link is cut; never returns once crashed. */
  async #reach(): Promise<void> {
    while (this.#healed || this.#crashed) {
      if (this.#crashed) await new Promise(() => undefined); // a dead process sends nothing
      await this.#healed;
    }
  }

  async #call<T>(call: () => Promise<T>): Promise<T> {
    await this.#reach();
    const result = await call();
    await this.#reach(); // the reply crosses the same link
    return result;
  }

  begin(...args: Parameters<RecordBackend['begin']>) {
    return this.#call(() => this.records.begin(...args));
  }
  renew(...args: Parameters<RecordBackend['renew']>) {
    return this.#call(() => this.records.renew(...args));
  }
  complete(...args: Parameters<RecordBackend['complete']>) {
    return this.#call(() => this.records.complete(...args));
  }
  abandon(...args: Parameters<RecordBackend['abandon']>) {
    return this.#call(() => this.records.abandon(...args));
  }
  close(): Promise<void> {
    return this.records.close();
  }
}
