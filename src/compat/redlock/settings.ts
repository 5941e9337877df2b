import { InvalidArgumentError } from '../../errors.js';

/** redlock's settings, with its defaults. */
export interface Settings {
  readonly driftFactor: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly automaticExtensionThreshold: number;
}

export const DEFAULT_SETTINGS: Settings = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
});

/** Only the known numeric settings, over the defaults (redlock ignores anything else too). */
export function mergeSettings(base: Settings, overrides?: Partial<Settings>): Settings {
  if (overrides === undefined) return base; // the usual call: nothing to copy per lock
  const merged: Record<string, number> = { ...base };
  for (const name of Object.keys(DEFAULT_SETTINGS)) {
    const value = (overrides as Record<string, unknown> | undefined)?.[name];
    if (typeof value === 'number') merged[name] = value;
  }
  return merged as unknown as Settings;
}

/**
 * redlock polls retryCount more times, retryDelay apart; fencekit waits in its queue for that same
 * window instead (and is handed the key on release). retryCount -1 waits without limit.
 */
export function waitWindowMs(settings: Settings): number {
  if (settings.retryCount === -1) return Number.POSITIVE_INFINITY;
  return Math.max(0, settings.retryCount) * Math.max(0, settings.retryDelay);
}

/**
 * redlock's expiration: the moment the grant was made plus the duration minus the drift allowance
 * (and 2 ms). Counted from the grant, not from the call: a call that waited in the queue longer
 * than `duration` still gets its whole duration.
 */
export function expirationOf(grantedAt: number, duration: number, settings: Settings): number {
  return grantedAt + validityMs(duration, settings);
}

/** How long a lock of `duration` is held once granted: the duration less the drift allowance. */
function validityMs(duration: number, settings: Settings): number {
  return duration - (Math.round(settings.driftFactor * duration) + 2);
}

/** An integer duration that leaves some validity after the drift allowance (else the lock is born expired). */
export function checkDuration(duration: number, settings: Settings): void {
  if (Math.floor(duration) !== duration) {
    throw new InvalidArgumentError('duration', 'must be an integer value in milliseconds');
  }
  if (validityMs(duration, settings) <= 0) {
    throw new InvalidArgumentError(
      'duration',
      `${duration} ms leaves no time after the drift allowance (driftFactor × duration + 2 ms)`,
    );
  }
}
