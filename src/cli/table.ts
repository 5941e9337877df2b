/** Left-aligned columns two spaces apart, as `kubectl get` prints them. */
export function formatTable(header: string[], rows: string[][]): string {
  const cells = [header, ...rows].map((row) => row.map(printable));
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (row: string[]) =>
    row
      .map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return cells.map(line).join('\n');
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: escaping control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * A cell as the terminal may show it: text from the backend (an owner another process wrote) could
 * hold line ends or escape sequences that redraw the screen; they are shown escaped (`\u001b`).
 */
function printable(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
