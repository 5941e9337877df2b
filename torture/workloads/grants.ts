import type { GrantKind, TortureEvent } from '../history.js';
import { now } from '../history.js';

export interface GrantRecorder {
  /**
   * Records a grant reaching the worker's code (and, later, its signal's abort); returns its id,
   * unique in the run: `<worker>#<n>`.
   */
  granted(
    key: string,
    kind: GrantKind,
    token: bigint,
    signal: AbortSignal,
    extra?: Partial<Extract<TortureEvent, { type: 'grant' }>>,
  ): string;
}

/** The grant and abort events every workload records the same way. */
export function grantRecorder(
  worker: string,
  emit: (event: TortureEvent) => void,
  onGrant: () => void = () => undefined,
): GrantRecorder {
  let grants = 0;
  return {
    granted(key, kind, token, signal, extra = {}) {
      const grant = `${worker}#${++grants}`;
      onGrant();
      emit({
        ...extra,
        type: 'grant',
        t: now(),
        worker,
        key,
        grant,
        kind,
        token: String(token),
        abortedAtGrant: signal.aborted,
      });
      signal.addEventListener('abort', () =>
        emit({ type: 'abort', t: now(), worker, grant, reason: describeReason(signal.reason) }),
      );
      return grant;
    },
  };
}

export function codeOf(error: unknown): string {
  return (error as { code?: string })?.code ?? (error as Error)?.name ?? 'unknown';
}

export function describeReason(reason: unknown): string {
  return reason instanceof Error ? `${codeOf(reason)}: ${reason.message}` : String(reason);
}
