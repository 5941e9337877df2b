// The mission's cron story on PostgreSQL: three replicas run the same "send the campaign emails"
// tick at the same moment. A transaction-scoped try-lock lets one replica do the work, and a
// UNIQUE (user_id, campaign_id) row per email makes even a double run send nothing twice: the
// row is inserted in the same transaction as the lock, before the email goes out.
//
// Run: npm run build && node examples/pg-singleton-cron.mjs postgres://user@127.0.0.1:5432/db

import { withXactLock } from 'fencekit/postgres';
import pg from 'pg';

export async function setup(client) {
  await client.query(
    `CREATE TABLE IF NOT EXISTS campaign_users (user_id int PRIMARY KEY, email text NOT NULL)`,
  );
  await client.query(`CREATE TABLE IF NOT EXISTS campaign_emails (
    user_id int NOT NULL, campaign_id int NOT NULL, sent_by text NOT NULL, fence_token bigint NOT NULL,
    UNIQUE (user_id, campaign_id))`);
}

/**
 * One replica's tick. Returns how many emails this replica sent, or null if another replica held
 * the lock (it skips the tick instead of waiting: the other one is doing the work).
 */
export async function campaignTick(client, { campaignId, replica, send }) {
  return withXactLock(
    client,
    `cron/campaign-${campaignId}`,
    async ({ fencingToken }) => {
      // Claim every not-yet-emailed user; the unique key makes a second claim of the same user a no-op.
      const { rows } = await client.query(
        `INSERT INTO campaign_emails (user_id, campaign_id, sent_by, fence_token)
         SELECT u.user_id, $1, $2, $3 FROM campaign_users u
         ON CONFLICT (user_id, campaign_id) DO NOTHING
         RETURNING user_id`,
        [campaignId, replica, fencingToken.toString()],
      );
      for (const { user_id } of rows) await send(user_id);
      return rows.length;
    },
    { wait: false, owner: replica },
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const url = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const replicas = await Promise.all(
    ['replica-a', 'replica-b', 'replica-c'].map(async (name) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      return { name, client };
    }),
  );
  await setup(replicas[0].client);
  await replicas[0].client.query(
    `INSERT INTO campaign_users SELECT g, 'user' || g || '@example.com' FROM generate_series(1, 5) g ON CONFLICT DO NOTHING`,
  );
  const sent = [];
  const results = await Promise.all(
    replicas.map(({ name, client }) =>
      campaignTick(client, {
        campaignId: 7,
        replica: name,
        send: async (user) => sent.push(`${user} by ${name}`),
      }),
    ),
  );
  for (const [i, { name }] of replicas.entries()) {
    console.log(
      `${name}: ${results[i] === null ? 'skipped (another replica holds the tick)' : `sent ${results[i]}`}`,
    );
  }
  console.log(`emails sent: ${sent.length} (each user once)`);
  await Promise.all(replicas.map(({ client }) => client.end()));
}
