import { describe, expect, expectTypeOf, it } from 'vitest';
import type { EtcdLockProvider } from '../../adapters/etcd/index.js';
import type { PostgresLockProvider } from '../../adapters/postgres/index.js';
import type { RedisLockProvider, RedlockProvider } from '../../adapters/redis/index.js';
import type { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import {
  FinalError,
  IdempotencyInFlightError,
  IdempotencyMismatchError,
} from '../../src/idempotency/index.js';
import {
  AbortError,
  BackendUnavailableError,
  type ConnectedProvider,
  type ConnectedSemaphoreProvider,
  connect,
  FencekitError,
  type FencekitErrorCode,
  InvalidArgumentError,
  LockLostError,
  type LockProvider,
  LockTimeoutError,
  MemoryLockProvider,
  NotHolderError,
  NotImplementedError,
  ProviderClosedError,
  SemaphoreLimitMismatchError,
  StaleFencingTokenError,
} from '../../src/index.js';

// The type assertions below are checked by `tsc --noEmit` (npm test's type check): a code that
// widens to `string`, or a member connect() no longer guarantees, fails the build, not only a run.

describe('error codes', () => {
  const errors = [
    [new LockTimeoutError('k', 0), 'LOCK_TIMEOUT'],
    [new LockLostError('k', 1n, 'expired'), 'LOCK_LOST'],
    [new NotHolderError('k'), 'NOT_HOLDER'],
    [new StaleFencingTokenError('r', 1n, 2n), 'STALE_FENCING_TOKEN'],
    [new ProviderClosedError('memory'), 'PROVIDER_CLOSED'],
    [new BackendUnavailableError('down'), 'BACKEND_UNAVAILABLE'],
    [new InvalidArgumentError('key', 'empty'), 'INVALID_ARGUMENT'],
    [new AbortError('acquire', undefined), 'ABORTED'],
    [new NotImplementedError('this'), 'NOT_IMPLEMENTED'],
    [new SemaphoreLimitMismatchError('s', 1, 2), 'SEMAPHORE_LIMIT_MISMATCH'],
    [new IdempotencyMismatchError('k'), 'IDEMPOTENCY_MISMATCH'],
    [new IdempotencyInFlightError('k', 1), 'IDEMPOTENCY_IN_FLIGHT'],
    [new FinalError('no')] as const,
  ] as const;

  it('each class has its literal code in its type', () => {
    expectTypeOf<LockTimeoutError['code']>().toEqualTypeOf<'LOCK_TIMEOUT'>();
    expectTypeOf<LockLostError['code']>().toEqualTypeOf<'LOCK_LOST'>();
    expectTypeOf<NotHolderError['code']>().toEqualTypeOf<'NOT_HOLDER'>();
    expectTypeOf<StaleFencingTokenError['code']>().toEqualTypeOf<'STALE_FENCING_TOKEN'>();
    expectTypeOf<ProviderClosedError['code']>().toEqualTypeOf<'PROVIDER_CLOSED'>();
    expectTypeOf<BackendUnavailableError['code']>().toEqualTypeOf<'BACKEND_UNAVAILABLE'>();
    expectTypeOf<InvalidArgumentError['code']>().toEqualTypeOf<'INVALID_ARGUMENT'>();
    expectTypeOf<AbortError['code']>().toEqualTypeOf<'ABORTED'>();
    expectTypeOf<NotImplementedError['code']>().toEqualTypeOf<'NOT_IMPLEMENTED'>();
    expectTypeOf<SemaphoreLimitMismatchError['code']>().toEqualTypeOf<'SEMAPHORE_LIMIT_MISMATCH'>();
    expectTypeOf<IdempotencyMismatchError['code']>().toEqualTypeOf<'IDEMPOTENCY_MISMATCH'>();
    expectTypeOf<IdempotencyInFlightError['code']>().toEqualTypeOf<'IDEMPOTENCY_IN_FLIGHT'>();
    expectTypeOf<FinalError['code']>().toEqualTypeOf<'FINAL_ERROR'>();
    expectTypeOf<FencekitError['code']>().toEqualTypeOf<FencekitErrorCode>();
    expectTypeOf<string>().not.toExtend<FencekitErrorCode>();
    // @ts-expect-error a lock's loss is not a timeout: the literal types tell them apart
    const wrong: LockTimeoutError['code'] = new LockLostError('k', 1n, 'expired').code;
    expect(wrong).toBe('LOCK_LOST');
  });

  it('switch (error.code) narrows to the class', () => {
    const explain = (error: LockTimeoutError | LockLostError | StaleFencingTokenError): string => {
      switch (error.code) {
        case 'LOCK_TIMEOUT':
          return `waited ${error.waitMs} ms`; // waitMs: on LockTimeoutError only
        case 'LOCK_LOST':
          return `lost: ${error.reason}`;
        case 'STALE_FENCING_TOKEN':
          return `stale below ${error.highestAccepted}`;
        default: {
          const unhandled: never = error;
          return unhandled;
        }
      }
    };
    expect(explain(new LockTimeoutError('k', 5))).toBe('waited 5 ms');
    expect(explain(new LockLostError('k', 1n, 'expired'))).toBe('lost: expired');
    expect(explain(new StaleFencingTokenError('r', 1n, 2n))).toBe('stale below 2');
  });

  it('each error has at run time the code its type says', () => {
    for (const [error, code = 'FINAL_ERROR'] of errors) {
      expect(error).toBeInstanceOf(FencekitError);
      expect(error.code).toBe(code);
    }
  });
});

describe('what connect() resolves with', () => {
  it('has the members every built-in provider has, and semaphore where the scheme shows it', async () => {
    // Never called: tsc reads these, but calling connect() would start providers nobody closes.
    const connectTypes = () => {
      expectTypeOf(connect('memory://')).resolves.toEqualTypeOf<ConnectedSemaphoreProvider>();
      expectTypeOf(connect('etcd://h:2379')).resolves.toEqualTypeOf<ConnectedSemaphoreProvider>();
      expectTypeOf(connect('redlock://a,b,c')).resolves.toEqualTypeOf<ConnectedProvider>();
      expectTypeOf(connect(String('memory://'))).resolves.toEqualTypeOf<ConnectedProvider>();
    };
    expectTypeOf(connectTypes).toBeFunction();
    expectTypeOf<ConnectedProvider['forceRelease']>().toBeFunction();
    expectTypeOf<ConnectedProvider['list']>().toBeFunction();
    expectTypeOf<ConnectedProvider['on']>().toBeFunction();
    expectTypeOf<ConnectedProvider['off']>().toBeFunction();
    expectTypeOf<ConnectedSemaphoreProvider['semaphore']>().toBeFunction();
    // A provider of your own keeps them optional.
    expectTypeOf<LockProvider['semaphore']>().toExtend<undefined | ((...args: never[]) => unknown)>();
    expectTypeOf<undefined>().toExtend<LockProvider['semaphore']>();

    // What the built-in providers are, which is what the types above promise.
    expectTypeOf<MemoryLockProvider>().toExtend<ConnectedSemaphoreProvider>();
    expectTypeOf<EtcdLockProvider>().toExtend<ConnectedSemaphoreProvider>();
    expectTypeOf<ZooKeeperLockProvider>().toExtend<ConnectedSemaphoreProvider>();
    expectTypeOf<RedisLockProvider>().toExtend<ConnectedSemaphoreProvider>();
    expectTypeOf<PostgresLockProvider>().toExtend<ConnectedSemaphoreProvider>();
    expectTypeOf<RedlockProvider>().toExtend<ConnectedProvider>();
    expectTypeOf<RedlockProvider>().not.toExtend<ConnectedSemaphoreProvider>();

    const provider = await connect('memory://api-types');
    try {
      expect(provider).toBeInstanceOf(MemoryLockProvider);
      const permits = provider.semaphore('pool', { limit: 1 }); // no guard needed
      expect(await provider.list('')).toEqual([]);
      expect(permits.limit).toBe(1);
    } finally {
      await provider.close();
    }
  });
});
