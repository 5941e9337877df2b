import { describe, expect, it } from 'vitest';
import { formatTable } from '../../src/cli/table.js';

describe('formatTable', () => {
  it('aligns columns two spaces apart, the last one unpadded', () => {
    expect(
      formatTable(
        ['NAME', 'OWNER'],
        [
          ['a', 'ops-7'],
          ['longer', '-'],
        ],
      ),
    ).toBe('NAME    OWNER\na       ops-7\nlonger  -');
  });

  it('shows control characters from the backend escaped: no line end or escape sequence reaches the terminal', () => {
    const table = formatTable(['NAME', 'OWNER'], [['a', 'evil\u001b[2J\nfake row\u009b']]);
    expect(table).toBe('NAME  OWNER\na     evil\\u001b[2J\\u000afake row\\u009b');
    expect(table.split('\n')).toHaveLength(2);
  });
});
