import type { Db, Queryable } from '../postgres/db.ts';
import { createMissingIndex, migrate } from '../postgres/schema.ts';
import { isoText } from '../postgres/iso-text.ts';

// How API keys are used, for the dashboard: when each key was last used (the
// key list), and per UTC day how many requests each key made in each project,
// how many the rate limiter refused, and how full the key's bucket got (the
// Usage page). Operational records (not business facts, so not events),
// never written in a request's path: "last used" is written at most once a
// minute per key and process; the counts are summed in memory and added to
// PostgreSQL once a minute (and when the app closes), so another instance's
// requests show within about a minute, this instance's at once (`flush`).

export const KEY_USE_RECORD_EVERY_MS = 60_000;

export async function migrateKeyUsage(db: Db): Promise<void> {
  await migrate(db, async (tx) => {
    await tx.query('CREATE TABLE IF NOT EXISTS api_key_last_used (key_id text PRIMARY KEY, last_used_at timestamptz NOT NULL)');
    await tx.query(`CREATE TABLE IF NOT EXISTS api_key_usage_daily (
      key_id text NOT NULL, project_id text NOT NULL, day date NOT NULL, requests bigint NOT NULL,
      PRIMARY KEY (key_id, day, project_id))`);
    await createMissingIndex(tx, 'api_key_usage_daily_project', 'CREATE INDEX api_key_usage_daily_project ON api_key_usage_daily (project_id, day)');
    await tx.query(`CREATE TABLE IF NOT EXISTS api_key_rate_daily (
      key_id text NOT NULL, day date NOT NULL, limited bigint NOT NULL, peak_fill real NOT NULL,
      PRIMARY KEY (key_id, day))`);
  });
}

type Cell = { requests: number; limited: number; peak: number };
const SEP = '\u0000';

/** Remembers uses of keys: `seen` on every authenticated key use, `rated` on every decision of the key's rate limit. */
export class KeyUsage {
  private readonly written = new Map<string, number>();
  /** `day␀key␀project` → requests; `day␀key␀` → the rate limit's refusals and peak. */
  private pending = new Map<string, Cell>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Queryable,
    private readonly now: () => Date,
    /** The per-key rate limit the figures are measured against (the API's: a bucket of `burst`, refilled at `perSecond`). */
    readonly limit?: { burst: number; perSecond: number },
  ) {}

  seen(keyId: string, projectId?: string): void {
    const now = this.now();
    if (projectId !== undefined) this.cell(now, keyId, projectId).requests++;
    const last = this.written.get(keyId);
    if (last !== undefined && now.getTime() - last < KEY_USE_RECORD_EVERY_MS) return;
    // A bounded map: forgetting only means one more write.
    if (this.written.size >= 100_000) this.written.clear();
    this.written.set(keyId, now.getTime());
    void this.db
      .query('INSERT INTO api_key_last_used (key_id, last_used_at) VALUES ($1, $2) ON CONFLICT (key_id) DO UPDATE SET last_used_at = GREATEST(api_key_last_used.last_used_at, EXCLUDED.last_used_at)', [keyId, now])
      .catch(() => this.written.delete(keyId));
  }

  /** The rate limiter's decision on a request of the key: admitted or refused, and how full its bucket is now (0..1). */
  rated(keyId: string, admitted: boolean, fill: number): void {
    const c = this.cell(this.now(), keyId, '');
    if (!admitted) c.limited++;
    c.peak = Math.max(c.peak, Math.min(1, Math.max(0, admitted ? fill : 1)));
  }

  private cell(now: Date, keyId: string, projectId: string): Cell {
    const k = `${now.toISOString().slice(0, 10)}${SEP}${keyId}${SEP}${projectId}`;
    let c = this.pending.get(k);
    if (!c) {
      c = { requests: 0, limited: 0, peak: 0 };
      this.pending.set(k, c);
      this.timer ??= setTimeout(() => void this.flush().catch(() => undefined), KEY_USE_RECORD_EVERY_MS).unref();
    }
    return c;
  }

  /** Adds what this process counted to PostgreSQL (one statement per table); resolves once written. */
  flush(): Promise<void> {
    const run = async () => {
      clearTimeout(this.timer);
      this.timer = undefined;
      const cells = this.pending;
      if (cells.size === 0) return;
      this.pending = new Map();
      const use: [string[], string[], string[], number[]] = [[], [], [], []];
      const rate: [string[], string[], number[], number[]] = [[], [], [], []];
      for (const [k, c] of cells) {
        const [day, key, project] = k.split(SEP) as [string, string, string];
        if (project) use[0].push(key), use[1].push(project), use[2].push(day), use[3].push(c.requests);
        else rate[0].push(key), rate[1].push(day), rate[2].push(c.limited), rate[3].push(c.peak);
      }
      if (use[0].length > 0)
        await this.db.query(
          `INSERT INTO api_key_usage_daily (key_id, project_id, day, requests) SELECT * FROM unnest($1::text[], $2::text[], $3::date[], $4::bigint[])
           ON CONFLICT (key_id, day, project_id) DO UPDATE SET requests = api_key_usage_daily.requests + EXCLUDED.requests`,
          use,
        );
      if (rate[0].length > 0)
        await this.db.query(
          `INSERT INTO api_key_rate_daily (key_id, day, limited, peak_fill) SELECT * FROM unnest($1::text[], $2::date[], $3::bigint[], $4::real[])
           ON CONFLICT (key_id, day) DO UPDATE SET limited = api_key_rate_daily.limited + EXCLUDED.limited, peak_fill = GREATEST(api_key_rate_daily.peak_fill, EXCLUDED.peak_fill)`,
          rate,
        );
    };
    this.flushing = this.flushing.then(run, run);
    return this.flushing;
  }
}

/** The last use of each of an organization's keys that was ever used. */
export async function keysLastUsed(db: Queryable, orgId: string): Promise<Map<string, string>> {
  const { rows } = await db.query<{ key_id: string; at: string }>(`SELECT k.key_id, ${isoText('u.last_used_at')} AS at FROM api_keys k JOIN api_key_last_used u ON u.key_id = k.key_id WHERE k.org_id = $1`, [orgId]);
  return new Map(rows.map((r) => [r.key_id, r.at]));
}
