import { createHash } from 'node:crypto';
import type { Db } from '../../postgres/db.ts';
import { canonicalize } from '../../audit/hash.ts';
import { IDEMPOTENCY_KEY_MAX_CHARS, IDEMPOTENCY_PENDING_MAX_MS, IDEMPOTENCY_TTL_MS } from '../../limits.ts';
import { ApiError } from './errors.ts';
import { migrate } from '../../postgres/schema.ts';

// Idempotency-Key on mutating routes. A key is scoped to the credential's
// organization and environment; its first completed response (2xx or a 4xx
// decision) is replayed for a repeat with the same request; the same key with
// another request answers 409 idempotency_key_reused. A key whose request is
// still running answers 409 idempotency_request_in_progress; a request that
// failed with a 5xx before anything may have been written releases its key so
// the retry runs (src/http/kernel/route.ts). A key still pending after
// IDEMPOTENCY_PENDING_MAX_MS belongs to a request that was cut short (its
// process died): what it wrote is unknown, so it answers 503
// write_outcome_unknown, never runs the request again. These rows are
// operational records (like rate-limit counters), not business facts.

export type StoredResponse = { status: number; body: unknown; headers: Record<string, string> };

export type Begin = { kind: 'proceed' } | { kind: 'replay'; response: StoredResponse };

export async function migrateIdempotency(db: Db): Promise<void> {
  await migrate(db, (tx) => tx.query(`CREATE TABLE IF NOT EXISTS idempotency_keys (
    org_id text NOT NULL,
    environment text NOT NULL,
    key text NOT NULL,
    request_hash text NOT NULL,
    state text NOT NULL,
    response jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, environment, key)
  )`));
}

export function requestHash(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${path}\n${body === undefined ? '' : canonicalize(body)}`)
    .digest('hex');
}

export function checkKey(key: string): void {
  if (key.length === 0 || key.length > IDEMPOTENCY_KEY_MAX_CHARS || !/^[\x21-\x7e]+$/.test(key)) {
    throw new ApiError(400, 'invalid_idempotency_key', `Idempotency-Key must be 1-${IDEMPOTENCY_KEY_MAX_CHARS} visible ASCII characters`);
  }
}

export class IdempotencyStore {
  constructor(private readonly db: Db) {}

  async begin(orgId: string, environment: string, key: string, hash: string): Promise<Begin> {
    const ttlSeconds = Math.floor(IDEMPOTENCY_TTL_MS / 1000);
    // An expired key is forgotten first, so it can be claimed again.
    await this.db.query(`DELETE FROM idempotency_keys WHERE org_id = $1 AND environment = $2 AND key = $3 AND created_at < now() - make_interval(secs => $4)`, [
      orgId,
      environment,
      key,
      ttlSeconds,
    ]);
    const claimed = await this.db.query(
      `INSERT INTO idempotency_keys (org_id, environment, key, request_hash, state) VALUES ($1, $2, $3, $4, 'pending') ON CONFLICT DO NOTHING RETURNING key`,
      [orgId, environment, key, hash],
    );
    if (claimed.rowCount === 1) return { kind: 'proceed' };
    const { rows } = await this.db.query<{ request_hash: string; state: string; response: StoredResponse | null; abandoned: boolean }>(
      'SELECT request_hash, state, response, created_at < now() - make_interval(secs => $4) AS abandoned FROM idempotency_keys WHERE org_id = $1 AND environment = $2 AND key = $3',
      [orgId, environment, key, Math.floor(IDEMPOTENCY_PENDING_MAX_MS / 1000)],
    );
    const row = rows[0];
    if (!row) return this.begin(orgId, environment, key, hash);
    if (row.request_hash !== hash) {
      throw new ApiError(409, 'idempotency_key_reused', 'this Idempotency-Key was used with a different request');
    }
    if ((row.state !== 'done' || !row.response) && row.abandoned) {
      throw new ApiError(503, 'write_outcome_unknown', 'the first request with this Idempotency-Key never finished: it may have taken effect; read the resource before repeating it', { retry_safe: false });
    }
    if (row.state !== 'done' || !row.response) {
      throw new ApiError(409, 'idempotency_request_in_progress', 'a request with this Idempotency-Key is still being processed; retry shortly', { retriable: true });
    }
    return { kind: 'replay', response: row.response };
  }

  async complete(orgId: string, environment: string, key: string, response: StoredResponse): Promise<void> {
    await this.db.query(`UPDATE idempotency_keys SET state = 'done', response = $4 WHERE org_id = $1 AND environment = $2 AND key = $3`, [orgId, environment, key, JSON.stringify(response)]);
  }

  async release(orgId: string, environment: string, key: string): Promise<void> {
    await this.db.query(`DELETE FROM idempotency_keys WHERE org_id = $1 AND environment = $2 AND key = $3 AND state = 'pending'`, [orgId, environment, key]);
  }
}
