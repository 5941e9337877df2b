import type { GrantKind, TortureEvent } from '../history.js';
import { now } from '../history.js';
import type { FencedStorage, WriteResult } from '../storage.js';

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
        ...(signal.aborted ? { abortReason: describeReason(signal.reason) } : {}),
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

/**
 * One write to the protected storage, recorded with the time its holder checked its belief (`t`,
 * taken before the write is sent) and the time the storage answered.
 */
export async function recordedWrite(
  storage: FencedStorage,
  emit: (event: TortureEvent) => void,
  write: { worker: string; key: string; grant: string; token: bigint; value: string; live: boolean },
): Promise<WriteResult> {
  const t = now();
  const result = await storage.write(write.key, write.token, write.value);
  const { worker, key, grant, token, live } = write;
  emit({ type: 'write', t, tEnd: now(), worker, key, grant, token: String(token), live, result });
  return result;
}
