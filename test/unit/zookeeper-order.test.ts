import { describe, expect, it } from 'vitest';
import { queueOrder } from '../../adapters/zookeeper/index.js';

/** A node name as ZooKeeper makes it: the sequence formatted %010d (negative after the wrap). */
const padded = (seq: number) =>
  seq < 0 ? `-${String(-seq).padStart(9, '0')}` : String(seq).padStart(10, '0');
const node = (seq: number, kind = 'lock-') => `_c_0b6f6f2e-7d7a-4c55-9f5e-4d9a3b7f1c2a-${kind}${padded(seq)}`;

describe('ZooKeeper queue order', () => {
  it('sorts by sequence suffix, ignores other children and other kinds', () => {
    const names = [node(12), node(3), 'b', node(7, 'latch-'), node(10)];
    expect(queueOrder(names, 'lock-').map((n) => n.seq)).toEqual([3, 10, 12]);
    expect(queueOrder(names, 'latch-').map((n) => n.seq)).toEqual([7]);
  });

  it('orders exactly as Curator: the suffix compared as text, so wrapped (negative) sequences come first', () => {
    // Curator's LockInternals sorts every child by the text after "lock-"; reordering at the wrap
    // would make fencekit and Curator disagree on the head, and both would hold.
    const names = [node(-2147483647), node(2147483646), node(-2147483648), node(2147483647), node(-5)];
    expect(queueOrder(names, 'lock-').map((n) => n.seq)).toEqual([
      -5, -2147483647, -2147483648, 2147483646, 2147483647,
    ]);
    const curator = [...names].sort((a, b) => {
      const x = a.slice(a.lastIndexOf('lock-') + 5);
      const y = b.slice(b.lastIndexOf('lock-') + 5);
      return x < y ? -1 : x > y ? 1 : 0;
    });
    expect(queueOrder(names, 'lock-').map((n) => n.name)).toEqual(curator);
  });
});
