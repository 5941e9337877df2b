import type { Command } from 'commander';
import { InvalidArgumentError, NotImplementedError } from '../../errors.js';
import type { ReadWriteInfo } from '../../read-write/types.js';
import type { HolderInfo, LockInfo, LockProvider } from '../../types.js';
import { cliAction } from '../action.js';
import { type ConnectionFlags, connectionOptions, providerAction, withProvider } from '../connection.js';
import { EXIT } from '../exit-codes.js';
import { operator } from '../options.js';
import { type QueueDetail, type QueueRow, readQueue } from '../queue-rows.js';
import { formatTable } from '../table.js';

/** One row of `inspect`: the same fields in the table and in --json. */
export interface InspectRow {
  name: string;
  /** With --read-write only: 'write' or 'read' for a holder's row, null for a name nobody holds. */
  mode?: 'write' | 'read' | null;
  holder: string | null;
  token: string | null;
  since: string | null;
  ageMs: number | null;
  expiresAt: string | null;
  waiters: number;
  /**
   * Without --read-write: the name's waiters in grant order, the first QUEUE_LIMIT of them ([] when
   * inspect counted none; null where they could not be listed, as on Redlock, with queueNote).
   */
  queue?: QueueRow[] | null;
  /** Why queue is null. */
  queueNote?: string;
}

export function registerAdminCommands(program: Command): void {
  connectionOptions(program.command('inspect'))
    .description('show holder, fencing token, age, expiry, waiters and the waiter queue of locks')
    .argument('<name...>', 'lock names')
    .option('--read-write', "the names' read-write locks: a row for the writer or each reader, with MODE")
    .option(
      '--json',
      'a JSON array of {name, holder, token, since, ageMs, expiresAt, waiters, queue} (mode instead of queue with --read-write)',
    )
    .action(
      providerAction(
        async (
          provider,
          names: string[],
          flags: ConnectionFlags & { json?: boolean; readWrite?: boolean },
        ) => {
          const now = Date.now();
          const rows: InspectRow[] = [];
          for (const name of names) {
            if (flags.readWrite) {
              rows.push(...readWriteRows(await readWriteInfo(provider, name), now));
              continue;
            }
            const info = await provider.inspect(name);
            rows.push({ ...inspectRow(name, info, now), ...(await waiterQueue(provider, name, info)) });
          }
          if (flags.json) console.log(JSON.stringify(rows, null, 2));
          else if (flags.readWrite)
            console.log(formatTable(['NAME', 'MODE', ...TABLE_HEADER.slice(1)], rows.map(readWriteCells)));
          else {
            console.log(formatTable(TABLE_HEADER, rows.map(tableCells)));
            const waiting = rows.flatMap(queueCells);
            if (waiting.length > 0) console.log(`\n${formatTable(QUEUE_HEADER, waiting)}`);
            for (const row of rows) {
              if (row.queueNote !== undefined) console.error(`the queue of ${row.name}: ${row.queueNote}`);
            }
          }
          return EXIT.ok;
        },
      ),
    );

  connectionOptions(program.command('ls'))
    .description('list held lock names (where the backend can enumerate them)')
    .argument('[prefix]', 'only names that start with this', '')
    .option('--json', 'a JSON array of names')
    .action(
      providerAction(async (provider, prefix: string, flags: ConnectionFlags & { json?: boolean }) => {
        if (!provider.list)
          throw new NotImplementedError(`listing names on the ${provider.backend} provider`);
        const names = await provider.list(prefix);
        if (flags.json) console.log(JSON.stringify(names));
        else for (const name of names) console.log(name);
        return EXIT.ok;
      }),
    );

  connectionOptions(program.command('force-release'))
    .description("remove a lock's current grant whoever holds it (audited: --reason is required)")
    .argument('<name>', 'lock name')
    .requiredOption('--reason <text>', 'why, recorded with the release')
    .option(
      '--token <n>',
      'remove the grant only if it still has this fencing token (the one inspect showed): never a newer holder',
    )
    .option('--json', 'print the removed holder as JSON (null when nobody held it)')
    .action(
      cliAction(
        (
          _interrupts,
          name: string,
          flags: ConnectionFlags & { reason: string; token?: string; json?: boolean },
        ) =>
          withProvider(flags, async (provider) => {
            if (flags.reason.trim() === '') throw new InvalidArgumentError('--reason', 'must not be empty');
            if (flags.token !== undefined && !/^[1-9][0-9]*$/.test(flags.token))
              throw new InvalidArgumentError('--token', 'must be a positive integer (a fencing token)');
            if (!provider.forceRelease)
              throw new NotImplementedError(`force-release on the ${provider.backend} provider`);
            const removed = await provider.forceRelease(name, {
              reason: flags.reason,
              by: operator(),
              ...(flags.token === undefined ? {} : { fencingToken: BigInt(flags.token) }),
            });
            if (flags.json) console.log(JSON.stringify(removed ? holderJson(removed) : null));
            else if (removed)
              console.log(`released "${name}": holder ${removed.owner ?? '-'} token ${removed.fencingToken}`);
            else
              console.log(
                `"${name}" was not held${flags.token === undefined ? '' : ` with token ${flags.token}`}`,
              );
            return EXIT.ok;
          }),
      ),
    );
}

const TABLE_HEADER = ['NAME', 'HOLDER', 'TOKEN', 'AGE', 'EXPIRES', 'WAITERS'];
/** The waiter queues, printed under the names' table: a row per entry, next in line first. */
const QUEUE_HEADER = ['NAME', 'POSITION', 'OWNER', 'WAITING', 'REQUESTS'];
/** The most entries of a name's queue that inspect prints (queue()'s own default). */
const QUEUE_LIMIT = 100;

export function inspectRow(name: string, info: LockInfo | null, now: number): InspectRow {
  const holder = info?.holder ?? null;
  return {
    name,
    holder: holder ? (holder.owner ?? '') : null,
    token: holder ? holder.fencingToken.toString() : null,
    since: holder?.since?.toISOString() ?? null,
    ageMs: holder?.since ? Math.max(0, now - holder.since.getTime()) : null,
    expiresAt: holder?.expiresAt?.toISOString() ?? null,
    waiters: info?.waiters ?? 0,
  };
}

/**
 * The queue of a name that `info` (its inspect) shows waiters for: read after inspect, so the two
 * may differ by a waiter that came or went between the reads. No read when nobody waits. One that
 * cannot be read is null with a note (Redlock keeps no common queue; an outage): the row stands.
 */
async function waiterQueue(
  provider: LockProvider,
  name: string,
  info: LockInfo | null,
): Promise<QueueDetail> {
  if (!info || info.waiters === 0) return { queue: [] };
  return readQueue(provider, name, QUEUE_LIMIT);
}

function queueCells(row: InspectRow): string[][] {
  return (row.queue ?? []).map((entry) => [
    row.name,
    String(entry.position),
    entry.owner ?? '-',
    entry.waitingMs === null ? '-' : seconds(entry.waitingMs),
    entry.requests === null ? '-' : String(entry.requests),
  ]);
}

async function readWriteInfo(provider: LockProvider, name: string): Promise<ReadWriteInfo> {
  if (!provider.readWriteLock)
    throw new NotImplementedError(`read-write locks on the ${provider.backend} provider`);
  return provider.readWriteLock(name).inspect();
}

/** The writer's row, or a row per reader, or one empty row; each with the name's waiters. */
export function readWriteRows(info: ReadWriteInfo, now: number): InspectRow[] {
  const row = (mode: 'write' | 'read' | null, holder: HolderInfo | null): InspectRow => {
    const { name, ...fields } = inspectRow(info.name, { key: info.name, holder, waiters: info.waiters }, now);
    return { name, mode, ...fields };
  };
  if (info.writer) return [row('write', info.writer)];
  if (info.readers.length > 0) return info.readers.map((reader) => row('read', reader));
  return [row(null, null)];
}

function readWriteCells(row: InspectRow): string[] {
  const [name = '', ...rest] = tableCells(row);
  return [name, row.mode ?? '-', ...rest];
}

function tableCells(row: InspectRow): string[] {
  const expiresIn = row.expiresAt === null ? null : Date.parse(row.expiresAt) - Date.now();
  return [
    row.name,
    row.holder ?? '-',
    row.token ?? '-',
    row.ageMs === null ? '-' : seconds(row.ageMs),
    expiresIn === null ? '-' : expiresIn >= 0 ? `in ${seconds(expiresIn)}` : `${seconds(-expiresIn)} ago`,
    String(row.waiters),
  ];
}

/** A removed holder as force-release's --json prints it (the dashboard's API answers the same). */
export function holderJson(holder: HolderInfo) {
  return {
    holder: holder.owner ?? null,
    token: holder.fencingToken.toString(),
    since: holder.since?.toISOString() ?? null,
    expiresAt: holder.expiresAt?.toISOString() ?? null,
  };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;
