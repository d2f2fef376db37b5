import { OAUTH_KEY_PASTE_MAX_FAILURES, OAUTH_KEY_PASTE_WINDOW_MS } from '../limits.ts';
import { Rejection } from '../eventstore/handler.ts';
import type { Db } from '../postgres/db.ts';
import { migrate } from '../postgres/schema.ts';

// The brute-force guard of the consent page's API key paste: failed pastes per
// client address in a fixed window, counted in PostgreSQL so every instance
// shares the count (an operational counter, not a business fact: an UNLOGGED
// table a crash may empty).
//
// A paste first reserves an attempt in one atomic statement (INSERT … ON
// CONFLICT … DO UPDATE … RETURNING): the window restarts when it has passed,
// else the count goes up by one; a count beyond the limit is refused
// (`key_paste_limited`, which src/http/kernel/errors.ts answers 429 with Retry-After).
// A paste whose key turns out valid gives its attempt back, so only failures
// count and a person with a valid key is not locked out by earlier typos behind
// the same address — while concurrent guesses cannot all slip in before one is
// counted.

/** The rejection code of a paste over the limit. */
export const KEY_PASTE_LIMITED = 'key_paste_limited';

export type PasteGuardConfig = { maxFailures: number; windowMs: number };
export const defaultPasteGuard: PasteGuardConfig = { maxFailures: OAUTH_KEY_PASTE_MAX_FAILURES, windowMs: OAUTH_KEY_PASTE_WINDOW_MS };

export async function migratePasteGuard(db: Db): Promise<void> {
  await migrate(db, (tx) => tx.query(`CREATE UNLOGGED TABLE IF NOT EXISTS oauth_key_paste_failures (
    address text PRIMARY KEY,
    window_start timestamptz NOT NULL,
    failures integer NOT NULL
  )`));
}

/** A reserved attempt: given back when the pasted key is valid. */
export type PasteAttempt = { address: string; windowStart: Date };

export class PasteGuard {
  constructor(
    private readonly db: Db,
    private readonly cfg: PasteGuardConfig,
  ) {}

  /** Reserves an attempt for this address, or throws `key_paste_limited` (the limit, and the seconds until the window restarts) when it has failed too often in the window. */
  async reserve(address: string, now: Date): Promise<PasteAttempt> {
    const { rows } = await this.db.query<{ window_start: Date; failures: number }>(
      `INSERT INTO oauth_key_paste_failures AS f (address, window_start, failures) VALUES ($1, $2, 1)
       ON CONFLICT (address) DO UPDATE SET
         window_start = CASE WHEN f.window_start <= $2::timestamptz - make_interval(secs => $3 / 1000.0) THEN $2 ELSE f.window_start END,
         failures = CASE WHEN f.window_start <= $2::timestamptz - make_interval(secs => $3 / 1000.0) THEN 1 ELSE LEAST(f.failures + 1, $4 + 1) END
       RETURNING window_start, failures`,
      [address, now.toISOString(), this.cfg.windowMs, this.cfg.maxFailures],
    );
    const row = rows[0]!;
    if (row.failures > this.cfg.maxFailures) {
      const retry = Math.max(1, Math.ceil((row.window_start.getTime() + this.cfg.windowMs - now.getTime()) / 1000));
      throw new Rejection(KEY_PASTE_LIMITED, 'too many failed API key attempts from this address', { limit: this.cfg.maxFailures, remaining: 0, retry_after_seconds: retry });
    }
    return { address, windowStart: row.window_start };
  }

  /** The pasted key was valid: the attempt is not a failure (nothing when its window has since restarted). */
  async giveBack(a: PasteAttempt): Promise<void> {
    await this.db.query('UPDATE oauth_key_paste_failures SET failures = failures - 1 WHERE address = $1 AND window_start = $2 AND failures > 0', [a.address, a.windowStart.toISOString()]);
  }

  /** Drops the rows whose window has passed. */
  async sweep(now: Date): Promise<void> {
    await this.db.query('DELETE FROM oauth_key_paste_failures WHERE window_start <= $1', [new Date(now.getTime() - this.cfg.windowMs).toISOString()]);
  }
}
