/**
 * Names the checkout whose build the torture code drives instead of this one's: the root of
 * another checkout (a worktree of an old commit, built with `npm run build`). `--lib DIR` sets it.
 */
export const LIBRARY_ENV = 'FENCEKIT_TORTURE_LIB';

/** Set by library.ts in a process where the resolve hook is active: the root it resolves to. */
export const LIBRARY_ACTIVE = Symbol.for('fencekit.torture.library');
