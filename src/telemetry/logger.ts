import type { Redactor } from './redact.js';

type LogMethod = (...args: unknown[]) => void;

/**
 * The `logger` option: pino (and bunyan, winston) or the console. Each line is logged as
 * (fields, message), the form pino takes; the console prints both.
 */
export interface FencekitLogger {
  info: LogMethod;
  warn: LogMethod;
  error: LogMethod;
}

export type LogLevel = keyof FencekitLogger;

/** Logs through the user's logger with credentials masked; a logger that throws is ignored. */
export class SafeLog {
  readonly #logger: FencekitLogger | undefined;
  readonly #redactor: Redactor;

  constructor(logger: FencekitLogger | undefined, redactor: Redactor) {
    this.#logger = logger;
    this.#redactor = redactor;
  }

  write(level: LogLevel, fields: Record<string, unknown>, message: string): void {
    const logger = this.#logger;
    if (!logger) return;
    const safe: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(fields)) {
      if (typeof value === 'bigint') safe[name] = value.toString();
      else if (value instanceof Error) safe[name] = this.#redactor.text(String(value));
      else safe[name] = this.#redactor.error(value);
    }
    try {
      logger[level].call(logger, safe, this.#redactor.text(message));
    } catch {
      // A broken logger must not break a grant, a release or a renewal.
    }
  }
}
