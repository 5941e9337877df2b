import { CliProcesses, type CliRun, until } from './cli-process.js';

/** A CLI holder started by DashboardProcesses.holder. */
export interface Holder {
  run: CliRun;
  /** The fencing token its command got. */
  token: string;
  /** Its command's pid: ending it makes the CLI release. */
  command: number;
  /** When the token was read (Date.now()). */
  at: number;
}

/**
 * `fencekit dashboard` and lock holders as CLI processes, as an operator runs them: the dashboard's
 * tests share these. stop() ends them all; call it in afterEach.
 */
export class DashboardProcesses {
  readonly cli = new CliProcesses();
  /** The holders' commands: a holder CLI killed with SIGKILL leaves its command (its own session) running. */
  readonly #commands: number[] = [];

  /** Starts `fencekit dashboard` on a free port; resolves with the page's URL. */
  readonly dashboard = async (
    args: string[],
    options: { env?: Record<string, string> } = {},
  ): Promise<{ run: CliRun; url: string }> => {
    const run = this.cli.start(['dashboard', '--port', '0', '--interval', '250', ...args], options);
    let url = '';
    await until(`the dashboard listens (stderr: ${run.stderr()})`, () => {
      url = /dashboard on (http:\S+)/.exec(run.stdout())?.[1] ?? '';
      return url !== '' || run.child.exitCode !== null;
    });
    if (url === '') throw new Error(`the dashboard exited ${run.child.exitCode}: ${run.stderr()}`);
    return { run, url };
  };

  /** A CLI holder that prints its fencing token, then runs for `seconds`; resolves once it holds. */
  readonly holder = async (args: string[], seconds = 60): Promise<Holder> => {
    const run = this.cli.start([
      ...args,
      '--',
      'sh',
      '-c',
      `echo "$FENCEKIT_FENCING_TOKEN"; echo "command $$"; exec sleep ${seconds}`,
    ]);
    let token = '';
    let command = '';
    await until(`${args.slice(0, 2).join(' ')} holds (stderr: ${run.stderr()})`, () => {
      token = /^(\d+)$/m.exec(run.stdout())?.[1] ?? '';
      command = /^command (\d+)$/m.exec(run.stdout())?.[1] ?? '';
      return token !== '' && command !== '';
    });
    this.#commands.push(Number(command));
    return { run, token, command: Number(command), at: Date.now() };
  };

  /** Stops every CLI, then any command a killed holder left running. */
  async stop(): Promise<void> {
    await this.cli.stop();
    for (const pid of this.#commands.splice(0)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already: the CLI ended it
      }
    }
  }
}
