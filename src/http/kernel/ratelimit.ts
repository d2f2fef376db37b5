import { RATE_LIMIT_BURST, RATE_LIMIT_PER_SECOND } from '../../limits.ts';
import { RawHttpError } from './errors.ts';
import type { Db } from '../../postgres/db.ts';
import { migrate } from '../../postgres/schema.ts';

// Rate limits per API key (spec Part 7) and per client address (the OAuth
// endpoints). A refusal answers 429 {error: "rate_limited", ...} with the
// limit fields at the top level and Retry-After.

export type RateLimitConfig = { burst: number; perSecond: number };
export const defaultRateLimit: RateLimitConfig = { burst: RATE_LIMIT_BURST, perSecond: RATE_LIMIT_PER_SECOND };

/**
 * The limits are held in PostgreSQL, shared by every instance (issue 38): a
 * generic cell rate algorithm per key in an UNLOGGED table (an operational
 * counter; a crash may empty it, which only forgives). A key's state is its
 * theoretical arrival time `tat`: a request is admitted when
 * max(tat, now) + T <= now + tau, with T = 1000 / perSecond ms and
 * tau = burst · T, and moves tat by T: a token bucket of `burst` tokens
 * refilled at `perSecond`, as one number.
 *
 * Requests are admitted in batches: while one statement is in flight the
 * next requests queue, and the next statement takes them all (per key, the
 * first k of its n requests are admitted, k computed in the statement under
 * the key's row lock, the rows locked in key order, so concurrent instances
 * never lose an update nor deadlock on each other's cells). One request alone
 * costs one round trip; many cost one round trip per batch. (Four statements
 * in flight instead of one, measured: slower, 7 500 against 9 100 req/s on
 * bench/http-read; they queue on the key's row lock.)
 *
 * The same statement reads the applied positions of the `watch`ed
 * projections from the checkpoints table (the organization projection's and
 * the OAuth grants', whose read caches serve credentials and projects): an
 * instance learns there, before trusting its caches, of any write another
 * instance acknowledged before this request arrived.
 */
export type Admitted = { watched: ReadonlyMap<string, string | null> };

type Waiting = { key: string | null; resolve: (a: Admitted) => void; reject: (e: unknown) => void };

/** The time of the decision, ms: the injected clock ($2), else the database's when the statement began (one value for the whole statement). */
const NOW = `COALESCE($2::float8, extract(epoch FROM statement_timestamp()) * 1000)`;
const ADMIT = `WITH req AS (SELECT k, count(*)::int AS n FROM unnest($1::text[]) AS k GROUP BY k),
took AS (
  INSERT INTO rate_limit_cells AS c (key, tat, pending, admitted)
  SELECT k, ${NOW} + LEAST(n, $5::int) * $3::float8, n, LEAST(n, $5::int) FROM req ORDER BY req.k
  ON CONFLICT (key) DO UPDATE SET
    tat = GREATEST(c.tat, ${NOW}) + LEAST(EXCLUDED.pending, GREATEST(0, floor((${NOW} + $4::float8 - GREATEST(c.tat, ${NOW})) / $3::float8)))::int * $3::float8,
    admitted = LEAST(EXCLUDED.pending, GREATEST(0, floor((${NOW} + $4::float8 - GREATEST(c.tat, ${NOW})) / $3::float8)))::int,
    pending = EXCLUDED.pending
  RETURNING key, tat, admitted, ${NOW} AS now
)
SELECT ARRAY(SELECT c.applied_position FROM unnest($6::text[]) WITH ORDINALITY AS w(name, ord) LEFT JOIN checkpoints c ON c.name = w.name ORDER BY w.ord) AS watched,
  t.key, t.tat, t.admitted, t.now FROM (SELECT 1) one LEFT JOIN took t ON true`;

export async function migrateRateLimits(db: Db): Promise<void> {
  await migrate(db, (tx) =>
    tx.query(`CREATE UNLOGGED TABLE IF NOT EXISTS rate_limit_cells (
      key text PRIMARY KEY,
      tat double precision NOT NULL,
      pending integer NOT NULL,
      admitted integer NOT NULL
    )`),
  );
}

export class SharedRateLimiter {
  private queue: Waiting[] = [];
  private flushing = false;
  private ready: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly cfg: RateLimitConfig & { message?: string },
    /** The projections whose applied positions each admission reports. */
    private readonly watch: readonly string[] = [],
    /**
     * A clock for tests. Without one the database's clock decides: one clock for every instance, read
     * when the statement begins. A clock read before the statement was stale by the time the
     * statement got a connection of the pool: under load, by more than the whole burst window, so a
     * request was refused from a bucket another instance had just filled up to a later time (seen:
     * 429s with a burst of 100 000 during a rolling restart, cluster/rolling-restart).
     */
    private readonly now?: () => number,
    /** Told each decision on a key: admitted or not, and how full its bucket is after it (0..1): the Usage page's figures (src/usecases/key-usage.ts). */
    private readonly observe?: (key: string, admitted: boolean, fill: number) => void,
  ) {}

  /**
   * Admits one request of `key` (null: nothing to count, only the watched
   * positions), or rejects with the 429 `rate_limited` body and Retry-After.
   */
  take(key: string | null): Promise<Admitted> {
    return new Promise((resolve, reject) => {
      this.queue.push({ key, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue;
        this.queue = [];
        await this.admit(batch).catch((err: unknown) => {
          for (const w of batch) w.reject(err);
        });
      }
    } finally {
      this.flushing = false;
    }
  }

  private async admit(batch: Waiting[]): Promise<void> {
    this.ready ??= migrateRateLimits(this.db).catch((err) => {
      this.ready = undefined;
      throw err;
    });
    await this.ready;
    const T = 1000 / this.cfg.perSecond;
    const tau = this.cfg.burst * T;
    const clock = this.now?.() ?? null;
    // Cells are per limit: instances configured alike share them; a changed limit starts its own count.
    const cell = (key: string) => `${this.cfg.burst}/${this.cfg.perSecond}:${key}`;
    const keys = batch.flatMap((w) => (w.key === null ? [] : [cell(w.key)]));
    const { rows } = await this.db.query<{ watched: (string | null)[]; key: string | null; tat: number | null; admitted: number | null; now: number | null }>(ADMIT, [keys, clock, T, tau, this.cfg.burst, this.watch], { name: 'rate_limit_admit_v3' });
    const positions = rows[0]?.watched ?? [];
    const watched = new Map(this.watch.map((name, i) => [name, positions[i] ?? null]));
    const left = new Map<string, { admitted: number; tat: number; now: number }>();
    for (const r of rows) if (r.key !== null) left.set(r.key, { admitted: r.admitted!, tat: r.tat!, now: r.now! });
    for (const w of batch) {
      if (w.key === null) {
        w.resolve({ watched });
        continue;
      }
      const c = left.get(cell(w.key))!;
      this.observe?.(w.key, c.admitted > 0, (c.tat - c.now) / tau);
      if (c.admitted > 0) {
        c.admitted--;
        w.resolve({ watched });
        continue;
      }
      const retry = Math.max(1, Math.ceil((c.tat + T - tau - c.now) / 1000));
      w.reject(
        new RawHttpError(
          429,
          { error: 'rate_limited', message: this.cfg.message ?? 'too many requests for this API key', limit: this.cfg.burst, refill_per_second: this.cfg.perSecond, remaining: 0, retry_after_seconds: retry },
          { 'retry-after': String(retry) },
        ),
      );
    }
  }
}
