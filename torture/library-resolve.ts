// Module resolve hook (runs on Node's loader thread, registered by library.ts): resolves the
// package's own name from inside the chosen checkout, so its exports map picks the files.
let packageJson: string | undefined;

export function initialize(data: { packageJson: string }): void {
  packageJson = data.packageJson;
}

type NextResolve = (specifier: string, context: { parentURL?: string }) => Promise<unknown>;

export async function resolve(
  specifier: string,
  context: { parentURL?: string },
  next: NextResolve,
): Promise<unknown> {
  const ours = specifier === 'fencekit' || specifier.startsWith('fencekit/');
  return next(specifier, ours && packageJson ? { ...context, parentURL: packageJson } : context);
}
