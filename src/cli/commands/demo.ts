import type { Command } from 'commander';
import { connect } from '../../connect.js';
import { displayUrl } from '../../url-display.js';
import { type DemoResult, pauseMemoryClient, RUN_TITLES, runDemo } from '../demo.js';
import { demoWorker, runProcessStory } from '../demo-process.js';
import { milliseconds } from '../options.js';

/**
 * `demo`: the double-charge story on any backend (in process on memory://, with a child process
 * stopped by SIGSTOP elsewhere), and the hidden `demo-worker` that child runs. `cliPath` is the
 * CLI's own file, which the child runs again.
 */
export function registerDemoCommands(program: Command, cliPath: string): void {
  program
    .command('demo')
    .description('the double-charge story: a paused lock holder, without and with fencing')
    .option('--url <url>', 'backend to run it on', 'memory://demo')
    .option('--ttl <ms>', 'lease length', milliseconds, 1000)
    .action(async (opts: { url: string; ttl: number }) => {
      const onMemory = opts.url.startsWith('memory:');
      console.log(
        `fencekit demo on ${displayUrl(opts.url)}: worker A pauses longer than its lease while holding "orders/42"` +
          (onMemory ? ' (in-process pause)' : ' (worker A is a child process, stopped with SIGSTOP)'),
      );
      const print = (line: string) => console.log(line);
      let results: DemoResult[];
      if (onMemory) {
        results = await runDemo(() => connect(opts.url), pauseMemoryClient, print, opts.ttl);
      } else {
        results = [];
        for (const fencing of [false, true]) {
          print('');
          print(fencing ? RUN_TITLES.fenced : RUN_TITLES.unfenced);
          const result = await runProcessStory(opts.url, cliPath, fencing, opts.ttl, print);
          print(
            `  => ${result.charges} charge${result.charges === 1 ? '' : 's'}${fencing ? `, ${result.rejected} stale write rejected` : ''}`,
          );
          results.push(result);
        }
      }
      console.log('');
      console.log(
        results[0]?.charges === 1
          ? 'Summary: 1 charge in both runs. This lock has no TTL: it lives with its connection, which a' +
              ' stopped process keeps open, so B waited instead of overtaking A. Fencing still guards the' +
              ' storage against a holder whose connection did drop.'
          : `Summary: without fencing ${results[0]?.charges} charges, with fencing ${results[1]?.charges}.` +
              ' A TTL alone cannot stop a paused holder; the storage checking the token can.',
      );
    });

  program
    .command('demo-worker', { hidden: true })
    .requiredOption('--url <url>')
    .requiredOption('--key <key>')
    .option('--ttl <ms>', 'lease length', milliseconds, 1000)
    .action(async (opts: { url: string; key: string; ttl: number }) => {
      await demoWorker(opts.url, opts.key, opts.ttl);
    });
}
