/**
 * The dashboard's one reader of the backend: a look (snapshot.ts) every `intervalMs`, never two at
 * once, each bounded by `deadlineMs` on top of the provider's per-call deadlines. A failed or late
 * look turns the state to 'unavailable' (the API answers 503, the page shows a banner) and the
 * next look that succeeds turns it back. Listeners hear each new state and each timeline entry;
 * a listener that throws is ignored, so a broken client never stops the polling.
 */
import { FencekitError } from '../../errors.js';
import type { ProviderEventMap } from '../../events.js';
import { processSecrets } from '../../secret-mask.js';
import type { LockProvider } from '../../types.js';
import { type NameRow, takeSnapshot, type WatchedNames } from './snapshot.js';
import { changes, forcedKey, Timeline, type TimelineEntry } from './timeline.js';

/** How many force-released tokens are remembered. */
const MAX_FORCED = 1_000;

/** What the dashboard knows now: GET /api/names answers with it. */
export type DashboardState =
  | { status: 'starting' }
  | { status: 'ok'; at: string; names: NameRow[] }
  /** The last look failed; `names` is the last good one, if any, for the page to grey out. */
  | { status: 'unavailable'; at: string; error: string; names: NameRow[] };

export interface PollerListener {
  state(state: DashboardState): void;
  timeline(entry: TimelineEntry): void;
}

export interface PollerOptions {
  provider: LockProvider;
  watched: WatchedNames;
  intervalMs: number;
  /** The longest one look may take before it counts as an outage. */
  deadlineMs: number;
}

export class Poller {
  readonly timeline = new Timeline();
  readonly #options: PollerOptions;
  readonly #listeners = new Set<PollerListener>();
  /** Tokens force-released through this dashboard, whose disappearance the event reports already. */
  readonly #forced = new Set<string>();
  readonly #stop = new AbortController();
  #state: DashboardState = { status: 'starting' };
  #lastGood: NameRow[] | undefined;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;

  constructor(options: PollerOptions) {
    this.#options = options;
    options.provider.on?.('force-release', this.#onForceRelease);
  }

  get state(): DashboardState {
    return this.#state;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Looks again now (after a force-release), without waiting for the interval. */
  poke(): void {
    this.#wake?.();
  }

  subscribe(listener: PollerListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Stops polling; resolves once the look in flight (bounded by deadlineMs) has ended. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#wake?.();
    this.#options.provider.off?.('force-release', this.#onForceRelease);
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      await this.#look();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.#options.intervalMs);
        this.#wake = done;
        function done() {
          clearTimeout(timer);
          resolve();
        }
      });
      this.#wake = undefined;
    }
  }

  async #look(): Promise<void> {
    const { provider, watched, deadlineMs } = this.#options;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${deadlineMs} ms`)), deadlineMs);
    });
    const look = takeSnapshot(provider, watched);
    look.catch(() => undefined); // a look that lost the race to the deadline ends on its own calls' deadlines
    try {
      const names = await Promise.race([look, late]);
      const now = Date.now();
      if (this.#lastGood) {
        for (const entry of changes(this.#lastGood, names, now, this.#forced)) this.#record(entry);
      }
      this.#lastGood = names;
      this.#setState({ status: 'ok', at: new Date(now).toISOString(), names });
    } catch (error) {
      this.#setState({
        status: 'unavailable',
        at: new Date().toISOString(),
        error: describe(error),
        names: this.#lastGood ?? [],
      });
    } finally {
      clearTimeout(timer);
    }
  }

  #setState(state: DashboardState): void {
    this.#state = state;
    for (const listener of this.#listeners) guard(() => listener.state(state));
  }

  #record(entry: TimelineEntry): void {
    this.timeline.add(entry);
    for (const listener of this.#listeners) guard(() => listener.timeline(entry));
  }

  readonly #onForceRelease = (event: ProviderEventMap['force-release']): void => {
    const token = event.fencingToken.toString();
    this.#forced.add(forcedKey(event.key, token));
    // Only the latest force-releases matter (their grants vanish at the next look): the set stays small.
    if (this.#forced.size > MAX_FORCED) this.#forced.delete(this.#forced.values().next().value as string);
    const held = this.#lastGood
      ?.find((row) => row.name === event.key)
      ?.holders.find((holder) => holder.token === token);
    const heldMs = held?.since ? Math.max(0, Date.now() - Date.parse(held.since)) : undefined;
    this.#record({
      at: new Date().toISOString(),
      name: event.key,
      kind: this.#lastGood?.find((row) => row.name === event.key)?.kind ?? 'lock',
      type: 'force-release',
      owner: event.owner ?? null,
      token,
      reason: event.reason,
      by: event.by,
      seen: 'event',
      ...(heldMs === undefined ? {} : { heldMs }),
    });
  };
}

/** An error as the page may show it: code and message, credentials masked. */
function describe(error: unknown): string {
  const text =
    error instanceof FencekitError
      ? `${error.message} [${error.code}]`
      : error instanceof Error
        ? error.message
        : String(error);
  return processSecrets.text(text);
}

function guard(call: () => void): void {
  try {
    call();
  } catch {
    // a listener (one page's stream) that fails must not stop the others or the polling
  }
}
