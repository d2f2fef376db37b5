import type { Db, Queryable } from '../postgres/db.ts';
import { migrate } from '../postgres/schema.ts';
import { isoText } from '../postgres/iso-text.ts';

// When each API key was last used, for the dashboard's key list: an
// operational record (not a business fact, so not an event), written by the
// authenticator at most once a minute per key and process, and never in a
// request's path (the write is not awaited). "Last used" is therefore exact
// to about a minute.

export const KEY_USE_RECORD_EVERY_MS = 60_000;

export async function migrateKeyUsage(db: Db): Promise<void> {
  await migrate(db, (tx) => tx.query('CREATE TABLE IF NOT EXISTS api_key_last_used (key_id text PRIMARY KEY, last_used_at timestamptz NOT NULL)'));
}

/** Remembers uses of keys: `seen` is called on every authenticated key use; a write happens when the last one of this process is a minute old. */
export class KeyUsage {
  private readonly written = new Map<string, number>();

  constructor(
    private readonly db: Queryable,
    private readonly now: () => Date,
  ) {}

  seen(keyId: string): void {
    const now = this.now();
    const last = this.written.get(keyId);
    if (last !== undefined && now.getTime() - last < KEY_USE_RECORD_EVERY_MS) return;
    // A bounded map: forgetting only means one more write.
    if (this.written.size >= 100_000) this.written.clear();
    this.written.set(keyId, now.getTime());
    void this.db
      .query('INSERT INTO api_key_last_used (key_id, last_used_at) VALUES ($1, $2) ON CONFLICT (key_id) DO UPDATE SET last_used_at = GREATEST(api_key_last_used.last_used_at, EXCLUDED.last_used_at)', [keyId, now])
      .catch(() => this.written.delete(keyId));
  }
}

/** The last use of each of an organization's keys that was ever used. */
export async function keysLastUsed(db: Queryable, orgId: string): Promise<Map<string, string>> {
  const { rows } = await db.query<{ key_id: string; at: string }>(`SELECT k.key_id, ${isoText('u.last_used_at')} AS at FROM api_keys k JOIN api_key_last_used u ON u.key_id = k.key_id WHERE k.org_id = $1`, [orgId]);
  return new Map(rows.map((r) => [r.key_id, r.at]));
}
