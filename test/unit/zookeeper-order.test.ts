import { describe, expect, it } from 'vitest';
import { queueOrder } from '../../adapters/zookeeper/index.js';

const node = (seq: number, kind = 'lock-') => `_c_0b6f6f2e-7d7a-4c55-9f5e-4d9a3b7f1c2a-${kind}${String(seq)}`;

describe('ZooKeeper queue order', () => {
  it('sorts by sequence suffix, ignores other children and other kinds', () => {
    const names = [node(12), node(3), 'b', node(7, 'latch-'), node(10)];
    expect(queueOrder(names, 'lock-').map((n) => n.seq)).toEqual([3, 10, 12]);
    expect(queueOrder(names, 'latch-').map((n) => n.seq)).toEqual([7]);
  });

  it('puts sequences that wrapped to negative after the high ones', () => {
    const names = [node(-2147483647), node(2147483646), node(-2147483648), node(2147483647)];
    expect(queueOrder(names, 'lock-').map((n) => n.seq)).toEqual([
      2147483646, 2147483647, -2147483648, -2147483647,
    ]);
  });
});
