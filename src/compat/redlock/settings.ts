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

/**
 * Only the known numeric settings, over the defaults (redlock ignores anything else too). A number
 * out of its range is refused: redlock would compute with it (a NaN retryDelay retries at once, a
 * driftFactor of 1 or more makes every lock born expired).
 */
export function mergeSettings(base: Settings, overrides?: Partial<Settings>): Settings {
  if (overrides === undefined) return base; // the usual call: nothing to copy per lock
  const merged: Record<string, number> = { ...base };
  for (const name of Object.keys(DEFAULT_SETTINGS) as Array<keyof Settings>) {
    const value = (overrides as Record<string, unknown> | undefined)?.[name];
    if (typeof value !== 'number') continue;
    const why = SETTING_RULES[name](value);
    if (why) throw new InvalidArgumentError(`settings.${name}`, why);
    merged[name] = value;
  }
  return merged as unknown as Settings;
}

/** Why a setting's value is refused, or undefined when it is in range. */
const SETTING_RULES: Record<keyof Settings, (value: number) => string | undefined> = {
  driftFactor: (value) => (value >= 0 && value < 1 ? undefined : 'must be from 0 up to (not including) 1'),
  // Infinity: redlock's "retry forever", as -1.
  retryCount: (value) =>
    (Number.isInteger(value) && value >= -1) || value === Number.POSITIVE_INFINITY
      ? undefined
      : 'must be an integer of -1 (no limit) or more',
  retryDelay: finiteMs,
  retryJitter: finiteMs,
  automaticExtensionThreshold: finiteMs,
};

function finiteMs(value: number): string | undefined {
  return Number.isFinite(value) && value >= 0
    ? undefined
    : 'must be a finite number of milliseconds, 0 or more';
}

/**
 * redlock polls retryCount more times, retryDelay apart; fencekit waits in its queue for that same
 * window instead (and is handed the key on release). retryCount -1 (or Infinity) waits without limit.
 */
export function waitWindowMs(settings: Settings): number {
  if (settings.retryCount === -1 || settings.retryCount === Number.POSITIVE_INFINITY) {
    return Number.POSITIVE_INFINITY;
  }
  const window = settings.retryCount * settings.retryDelay;
  return window > Number.MAX_SAFE_INTEGER ? Number.POSITIVE_INFINITY : window;
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

/**
 * A positive safe integer duration that leaves some validity after the drift allowance (else the
 * lock is born expired). Infinity is refused too: its expiration would be NaN, a lock held forever.
 */
export function checkDuration(duration: number, settings: Settings): void {
  if (!Number.isSafeInteger(duration) || duration <= 0) {
    throw new InvalidArgumentError('duration', 'must be a positive integer value in milliseconds');
  }
  if (validityMs(duration, settings) <= 0) {
    throw new InvalidArgumentError(
      'duration',
      `${duration} ms leaves no time after the drift allowance (driftFactor × duration + 2 ms)`,
    );
  }
}
