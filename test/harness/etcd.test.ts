import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

const clientFor = (hosts: string) => new Etcd3({ hosts: hosts.split(','), dialTimeout: 2_000 });

describe('etcd single node (real server)', () => {
  let etcd: ServerGroup;
  beforeAll(async () => {
    etcd = await startServers('etcd');
  });
  afterAll(() => etcd?.stop());

  it('puts and gets a key', async () => {
    const client = clientFor(endpoint(etcd, 'ETCD_ENDPOINTS'));
    try {
      await client.put('fencekit/smoke').value('hello');
      expect(await client.get('fencekit/smoke').string()).toBe('hello');
    } finally {
      client.close();
    }
  });
});

describe('etcd 3-member cluster (real servers)', () => {
  let cluster: ServerGroup;
  beforeAll(async () => {
    cluster = await startServers('etcd', { size: 3, faults: true });
  });
  afterAll(() => cluster?.stop());

  it('has one leader and keeps writing after the leader is killed', async () => {
    expect(cluster.members).toHaveLength(3);
    const leaderOf = async (hosts: string[]) => {
      const ids = new Set<string>();
      for (const host of hosts) {
        const one = clientFor(host);
        try {
          const status = await one.maintenance.status();
          ids.add(status.leader);
        } finally {
          one.close();
        }
      }
      return ids;
    };
    const addresses = cluster.members.map((m) => m.address);
    const leaders = await leaderOf(addresses);
    expect(leaders.size, 'every member names the same leader').toBe(1);

    // Find which member leads, kill it (SIGKILL), and write through the survivors.
    let leaderIndex = -1;
    for (const [index, address] of addresses.entries()) {
      const one = clientFor(address);
      try {
        const status = await one.maintenance.status();
        if (status.leader === status.header.member_id) leaderIndex = index;
      } finally {
        one.close();
      }
    }
    expect(leaderIndex).toBeGreaterThanOrEqual(0);
    await cluster.members[leaderIndex]?.kill();
    const survivors = addresses.filter((_, i) => i !== leaderIndex);
    const client = clientFor(survivors.join(','));
    try {
      await client.put('fencekit/after-kill').value('still writing');
      expect(await client.get('fencekit/after-kill').string()).toBe('still writing');
      expect((await leaderOf(survivors)).size).toBe(1);
    } finally {
      client.close();
    }
  });
});
