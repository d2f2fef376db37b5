import { createHmac, randomInt } from 'node:crypto';
import { SEALER_OUTPUT_TYPES } from '../../events/audit.ts';
import { isAuditStream } from '../audit/chain.ts';
import { webhookDecider, webhookStream } from '../../commands/webhook.ts';
import { approvalPageUrl } from '../../commands/approval.ts';
import { guardedRequest, type AllowedTargets } from '../adapters/outbound-http.ts';
import type { Vault } from '../adapters/vault.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { EventStore, Position, RecordedEvent } from '../eventstore/port.ts';
import type { Db, Queryable, Transaction } from '../postgres/db.ts';
import { advanceCheckpoint, ensureCheckpoint, readCheckpoint } from '../projector/checkpoints.ts';
import { batches } from '../projector/follow.ts';
import type { Progress } from '../projector/progress.ts';
import { webhookDeliveries } from '../metrics.ts';
import { createMissingIndex, migrate } from '../postgres/schema.ts';

// Outbound webhooks, as a reactor with its own checkpoint (a rebuild of the
// read models never re-sends anything):
//  - the dispatcher follows the log and, in one transaction with its
//    checkpoint, stores each event and one pending delivery per matching
//    endpoint (unique per event and endpoint: a restart never duplicates);
//  - the worker sends due deliveries of active endpoints, signs them (Standard
//    Webhooks), stores every attempt, retries on a schedule with jitter,
//    dead-letters the last allowed attempt, and pauses an endpoint into `error`
//    after enough consecutive dead deliveries.
// Deliveries and attempts are operational records; the endpoint's status
// changes are events.

export const DISPATCHER_NAME = 'webhook-dispatcher';
/** Svix's schedule: delays before attempts 2..8. */
export const DEFAULT_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
export const RESPONSE_BODY_MAX_BYTES = 16_384;

export type WebhookConfig = {
  scheduleMs: number[];
  deadThreshold: number;
  timeoutMs: number;
  allow: AllowedTargets;
  jitter: number;
  workerIntervalMs: number;
  /** The service's public base URL: an approval's events are delivered with `approval_url`, the page where a person decides it. */
  baseUrl?: string;
};

export const defaultWebhookConfig = (allow: AllowedTargets, baseUrl?: string): WebhookConfig => ({
  ...(baseUrl ? { baseUrl } : {}),
  scheduleMs: DEFAULT_SCHEDULE_MS,
  deadThreshold: 5,
  timeoutMs: 10_000,
  allow,
  jitter: 0.1,
  workerIntervalMs: 250,
});

export async function migrateWebhooks(db: Db): Promise<void> {
  await migrate(db, async (tx) => {
    await tx.query(`CREATE TABLE IF NOT EXISTS webhook_events (
      id uuid PRIMARY KEY,
      org_id text NOT NULL,
      project_id text,
      event_type text NOT NULL,
      payload jsonb NOT NULL,
      received_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    )`);
    await tx.query(`CREATE TABLE IF NOT EXISTS webhook_deliveries (
      id bigserial PRIMARY KEY,
      trigger_id text NOT NULL,
      event_id uuid NOT NULL,
      org_id text NOT NULL,
      project_id text NOT NULL,
      kind text NOT NULL,
      attempt int NOT NULL DEFAULT 0,
      status text NOT NULL DEFAULT 'pending',
      next_attempt_at timestamptz NOT NULL,
      claimed_until timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    )`);
    await createMissingIndex(tx, 'webhook_deliveries_once', `CREATE UNIQUE INDEX IF NOT EXISTS webhook_deliveries_once ON webhook_deliveries (trigger_id, event_id) WHERE kind = 'original'`);
    await createMissingIndex(tx, 'webhook_deliveries_due', `CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`);
    await createMissingIndex(tx, 'webhook_deliveries_trigger', `CREATE INDEX IF NOT EXISTS webhook_deliveries_trigger ON webhook_deliveries (trigger_id, id)`);
    await tx.query(`CREATE TABLE IF NOT EXISTS webhook_attempts (
      id bigserial PRIMARY KEY,
      delivery_id bigint NOT NULL,
      attempt int NOT NULL,
      request_headers jsonb NOT NULL,
      request_body text NOT NULL,
      response_status int,
      response_headers jsonb,
      response_body text,
      response_truncated boolean NOT NULL DEFAULT false,
      error text,
      delivered boolean NOT NULL,
      created_at timestamptz NOT NULL
    )`);
    await createMissingIndex(tx, 'webhook_attempts_delivery', `CREATE INDEX IF NOT EXISTS webhook_attempts_delivery ON webhook_attempts (delivery_id, attempt)`);
    // The dashboard's reads: dead letters by cursor, and attempts per hour.
    await createMissingIndex(tx, 'webhook_deliveries_dead', `CREATE INDEX IF NOT EXISTS webhook_deliveries_dead ON webhook_deliveries (trigger_id, id) WHERE status = 'dead'`);
    await createMissingIndex(tx, 'webhook_attempts_created', `CREATE INDEX IF NOT EXISTS webhook_attempts_created ON webhook_attempts (created_at)`);
    await migrateHourlySums(tx);
    await tx.query(`CREATE TABLE IF NOT EXISTS webhook_endpoint_stats (
      trigger_id text PRIMARY KEY,
      total_runs bigint NOT NULL DEFAULT 0,
      last_run_at timestamptz,
      consecutive_dead int NOT NULL DEFAULT 0
    )`);
  });
}

/**
 * Attempts per endpoint and UTC hour (delivered, failed), for the dashboard's
 * chart: operational sums the dispatcher adds to in the statement that records
 * each attempt, so a page reads at most 24 rows instead of counting the
 * window's attempts. Made from the recorded attempts the once it is created.
 */
async function migrateHourlySums(tx: Transaction): Promise<void> {
  const { rows } = await tx.query<{ found: string | null }>(`SELECT to_regclass('webhook_attempts_hourly')::text AS found`);
  if (rows[0]?.found != null) return;
  await tx.query(`CREATE TABLE webhook_attempts_hourly (
    trigger_id text NOT NULL,
    hour timestamptz NOT NULL,
    org_id text NOT NULL,
    project_id text NOT NULL,
    delivered int NOT NULL DEFAULT 0,
    failed int NOT NULL DEFAULT 0,
    PRIMARY KEY (trigger_id, hour)
  )`);
  await tx.query('CREATE INDEX webhook_attempts_hourly_project ON webhook_attempts_hourly (org_id, project_id, hour)');
  await sumRecordedAttempts(tx);
}

/** (Re)makes the hourly sums from the recorded attempts (of one endpoint, or all): at creation, and for seeded rows. */
export async function sumRecordedAttempts(q: Queryable, triggerId?: string): Promise<void> {
  const params = triggerId ? [triggerId] : [];
  const only = triggerId ? ' WHERE d.trigger_id = $1' : '';
  await q.query(`DELETE FROM webhook_attempts_hourly${triggerId ? ' WHERE trigger_id = $1' : ''}`, params);
  await q.query(
    `INSERT INTO webhook_attempts_hourly (trigger_id, hour, org_id, project_id, delivered, failed)
     SELECT d.trigger_id, ${UTC_HOUR('a.created_at')}, d.org_id, d.project_id, count(*) FILTER (WHERE a.delivered), count(*) FILTER (WHERE NOT a.delivered)
     FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id${only} GROUP BY 1, 2, 3, 4`,
    params,
  );
}

/** The UTC hour a timestamptz falls in (whatever the session's time zone). */
export const UTC_HOUR = (at: string): string => `(date_trunc('hour', ${at} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')`;

/** The provider a stored event concerns, in SQL over its payload: the data's server_id when that is a string. */
export const eventServerIdSql = (payload: string): string => `(CASE WHEN jsonb_typeof(${payload}->'server_id') = 'string' THEN ${payload}->>'server_id' END)`;

/**
 * The one rule that says whether endpoint `w` (a webhook_endpoints row)
 * subscribes to stored event `x` (a webhook_events row), used by live dispatch
 * and by replay: same organization, the endpoint's project when the event has
 * one, the subscribed event type, not deleted, and, for an endpoint bound to a
 * provider (server_id), an event that concerns that provider or none.
 * Live dispatch adds that the endpoint existed before the event; replay, that
 * it is active.
 */
export const endpointMatchesEventSql = (w: string, x: string): string =>
  `(${w}.org_id = ${x}.org_id AND ${w}.event = ${x}.event_type AND NOT ${w}.deleted
    AND (${x}.project_id IS NULL OR ${w}.project_id = ${x}.project_id)
    AND (${w}.server_id IS NULL OR coalesce(${eventServerIdSql(`${x}.payload`)}, ${w}.server_id) = ${w}.server_id))`;

/** Deliveries claimed per round of a drain. */
const DRAIN_BATCH = 50;

export type StoredEvent = { id: string; source: string; event_type: string; payload: Record<string, unknown>; received_at: string };

type Claimed = { id: string; trigger_id: string; event_id: string; attempt: number; url: string; secret_ref: string; previous_secret_ref: string | null; previous_valid_until: string | null; org_id: string; event_type: string; payload: Record<string, unknown>; received_at: string };

export type DrainCounts = { scanned: number; redispatched: number; delivered: number; failed: number; dead: number };

export class WebhookDispatcher {
  private abort = new AbortController();
  private loop: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private draining: Promise<DrainCounts> | undefined;

  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly vault: Vault,
    private readonly progress: Progress,
    readonly cfg: WebhookConfig,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async start(opts: { worker?: boolean } = {}): Promise<void> {
    await migrateWebhooks(this.db);
    await ensureCheckpoint(this.db, DISPATCHER_NAME, 'reactor', 1);
    this.abort = new AbortController();
    this.loop = this.follow();
    if (opts.worker !== false) {
      this.timer = setInterval(() => void this.drain({}).catch(() => {}), this.cfg.workerIntervalMs);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.abort.abort();
    await this.loop;
    await this.draining?.catch(() => {});
  }

  private async follow(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        let pos: Position = (await readCheckpoint(this.db, DISPATCHER_NAME))?.position ?? '';
        for await (const batch of batches(this.store, pos, signal)) {
          const last = batch[batch.length - 1]!.position;
          // Endpoints are matched against the webhook read model, which must have seen the batch.
          await this.progress.waitForOne('webhook', last, 60_000);
          await this.dispatch(batch, last);
          pos = last;
          this.progress.report(DISPATCHER_NAME, pos);
        }
      } catch {
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** What a delivery carries: the event's data, and for an approval's events the link to its page (derived here, never stored in the event). */
  private payloadOf(e: RecordedEvent): Record<string, unknown> {
    const id = e.type.startsWith('approval.') ? (e.data as { approval_id?: unknown }).approval_id : undefined;
    return typeof id === 'string' && this.cfg.baseUrl ? { ...(e.data as Record<string, unknown>), approval_url: approvalPageUrl(this.cfg.baseUrl, id) } : (e.data as Record<string, unknown>);
  }

  private async dispatch(batch: readonly RecordedEvent[], last: Position): Promise<void> {
    // Only the sealer's own output (the chain and its checkpoints) is not a business event;
    // audit configuration and incidents (audit_config-, audit_incident- streams) are.
    const events = batch.filter((e) => !SEALER_OUTPUT_TYPES.has(e.type) && !isAuditStream(e.streamName));
    await this.db.transaction(async (tx) => {
      if (events.length > 0) {
        const rows = events.map((e) => ({ id: e.id, org_id: e.metadata.org_id, project_id: (e.metadata.project_id as string | null | undefined) ?? null, event_type: e.type, payload: this.payloadOf(e), received_at: e.recordedAt, position: e.position }));
        await tx.query(
          `INSERT INTO webhook_events (id, org_id, project_id, event_type, payload, received_at, position)
           SELECT id, org_id, project_id, event_type, payload, received_at, position
           FROM json_to_recordset($1::json) AS x(id uuid, org_id text, project_id text, event_type text, payload jsonb, received_at timestamptz, position text)
           ON CONFLICT (id) DO NOTHING`,
          [JSON.stringify(rows)],
        );
        // One pending delivery per matching endpoint that existed before the event (matched on the stored event, as replay does).
        await tx.query(
          `INSERT INTO webhook_deliveries (trigger_id, event_id, org_id, project_id, kind, next_attempt_at)
           SELECT w.id, x.id, w.org_id, w.project_id, 'original', $2
           FROM webhook_events x JOIN webhook_endpoints w ON ${endpointMatchesEventSql('w', 'x')} AND w.created_position < x.position
           WHERE x.id = ANY($1::uuid[])
           ON CONFLICT DO NOTHING`,
          [rows.map((r) => r.id), this.now().toISOString()],
        );
      }
      await advanceCheckpoint(tx, DISPATCHER_NAME, last);
    });
  }

  /**
   * Sends due deliveries of active endpoints (all pending ones of a project,
   * due or not, when `all`). One call attempts each delivery at most once: a
   * failed attempt is scheduled for its next retry and left for a later call.
   */
  drain(scope: { orgId?: string; projectId?: string; all?: boolean }): Promise<DrainCounts> {
    if (!scope.orgId) {
      this.draining ??= this.drainOnce(scope).finally(() => (this.draining = undefined));
      return this.draining;
    }
    return this.drainOnce(scope);
  }

  private async drainOnce(scope: { orgId?: string; projectId?: string; all?: boolean }): Promise<DrainCounts> {
    const counts: DrainCounts = { scanned: 0, redispatched: 0, delivered: 0, failed: 0, dead: 0 };
    // The pass walks the queue once, in id order: a delivery that just failed is
    // pending again (and, with `all`, not filtered out by its next_attempt_at),
    // so only ids above the last claimed one are taken.
    let after = 0n;
    for (;;) {
      const params: unknown[] = [DRAIN_BATCH, after.toString()];
      let where = `d.id > $2::bigint AND d.status = 'pending' AND (d.claimed_until IS NULL OR d.claimed_until < now()) AND w.status = 'active' AND NOT w.deleted`;
      if (!scope.all) {
        params.push(this.now().toISOString());
        where += ` AND d.next_attempt_at <= $${params.length}`;
      }
      if (scope.orgId) {
        params.push(scope.orgId, scope.projectId);
        where += ` AND d.org_id = $${params.length - 1} AND d.project_id = $${params.length}`;
      }
      const { rows } = await this.db.query<Claimed>(
        `UPDATE webhook_deliveries d SET claimed_until = now() + interval '60 seconds'
         FROM webhook_endpoints w, webhook_events ev
         WHERE d.id IN (
           SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.trigger_id WHERE ${where}
           ORDER BY d.id LIMIT $1 FOR UPDATE OF d SKIP LOCKED
         ) AND w.id = d.trigger_id AND ev.id = d.event_id
         RETURNING d.id::text, d.trigger_id, d.event_id::text, d.attempt, w.webhook_url AS url, w.secret_ref, w.previous_secret_ref, w.previous_valid_until::text, d.org_id,
           ev.event_type, ev.payload, to_char(ev.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS received_at`,
        params,
      );
      if (rows.length === 0) return counts;
      counts.scanned += rows.length;
      for (const r of rows) if (BigInt(r.id) > after) after = BigInt(r.id);
      // A send that threw (no attempt stored, or an auto-pause that failed) counts as scanned only; an unfinished claim lapses for a later pass.
      const results = await Promise.allSettled(rows.map((r) => this.send(r)));
      for (const res of results) {
        if (res.status !== 'fulfilled') continue;
        counts.redispatched++;
        counts[res.value]++;
      }
      if (rows.length < DRAIN_BATCH) return counts;
    }
  }

  private async secrets(d: Claimed): Promise<Buffer[]> {
    const out: Buffer[] = [];
    const current = await this.vault.get(d.org_id, d.secret_ref);
    if (current) out.push(current);
    if (d.previous_secret_ref && d.previous_valid_until && Date.parse(d.previous_valid_until) > this.now().getTime()) {
      const prev = await this.vault.get(d.org_id, d.previous_secret_ref);
      if (prev) out.push(prev);
    }
    return out;
  }

  private async send(d: Claimed): Promise<'delivered' | 'failed' | 'dead'> {
    const attempt = d.attempt + 1;
    const at = this.now();
    const stored: StoredEvent = { id: d.event_id, source: 'agent-ledger', event_type: d.event_type, payload: d.payload, received_at: d.received_at };
    const body = JSON.stringify(stored);
    const timestamp = Math.floor(at.getTime() / 1000).toString();
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-svc-event': d.event_type,
      'x-svc-event-id': d.event_id,
      'x-svc-trigger-id': d.trigger_id,
      'x-svc-attempt': String(attempt),
      'webhook-id': d.event_id,
      'webhook-timestamp': timestamp,
    };
    const secrets = await this.secrets(d);
    if (secrets.length > 0) {
      headers['webhook-signature'] = secrets.map((s) => `v1,${createHmac('sha256', s).update(`${d.event_id}.${timestamp}.${body}`).digest('base64')}`).join(' ');
    }
    let status: number | null = null;
    let resHeaders: Record<string, string> | null = null;
    let resBody: string | null = null;
    let truncated = false;
    let error: string | null = null;
    try {
      const r = await guardedRequest(d.url, this.cfg.allow, { method: 'POST', headers, body, timeoutMs: this.cfg.timeoutMs, maxBodyBytes: RESPONSE_BODY_MAX_BYTES });
      status = r.status;
      resHeaders = r.headers;
      resBody = r.body;
      truncated = r.truncated;
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    // Success is a 2xx only; a redirect is a failure (never followed); 410 Gone dead-letters at once.
    const delivered = status !== null && status >= 200 && status < 300;
    const dead = !delivered && (status === 410 || attempt > this.cfg.scheduleMs.length);
    const delay = this.cfg.scheduleMs[attempt - 1] ?? 0;
    const jittered = Math.round(delay * (1 + (randomInt(0, 2001) / 1000 - 1) * this.cfg.jitter));
    const outcome = delivered ? 'delivered' : dead ? 'dead' : 'failed';
    webhookDeliveries.inc({ outcome });
    await this.db.transaction(async (tx) => {
      // The attempt, and its hour's sums in the same statement.
      await tx.query(
        `WITH a AS (
           INSERT INTO webhook_attempts (delivery_id, attempt, request_headers, request_body, response_status, response_headers, response_body, response_truncated, error, delivered, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING delivery_id, delivered, created_at)
         INSERT INTO webhook_attempts_hourly AS h (trigger_id, hour, org_id, project_id, delivered, failed)
         SELECT d.trigger_id, ${UTC_HOUR('a.created_at')}, d.org_id, d.project_id, a.delivered::int, (NOT a.delivered)::int
         FROM a JOIN webhook_deliveries d ON d.id = a.delivery_id
         ON CONFLICT (trigger_id, hour) DO UPDATE SET delivered = h.delivered + excluded.delivered, failed = h.failed + excluded.failed`,
        [d.id, attempt, JSON.stringify(headers), body, status, resHeaders === null ? null : JSON.stringify(resHeaders), resBody, truncated, error, delivered, at.toISOString()],
      );
      await tx.query(
        `UPDATE webhook_deliveries SET attempt = $2, status = $3, next_attempt_at = $4, claimed_until = NULL, finished_at = CASE WHEN $3 = 'pending' THEN NULL ELSE $5::timestamptz END WHERE id = $1`,
        [d.id, attempt, outcome === 'failed' ? 'pending' : outcome, new Date(at.getTime() + jittered).toISOString(), at.toISOString()],
      );
      if (delivered) {
        await tx.query(
          `INSERT INTO webhook_endpoint_stats (trigger_id, total_runs, last_run_at, consecutive_dead) VALUES ($1, 1, $2, 0)
           ON CONFLICT (trigger_id) DO UPDATE SET total_runs = webhook_endpoint_stats.total_runs + 1, last_run_at = $2, consecutive_dead = 0`,
          [d.trigger_id, at.toISOString()],
        );
      } else if (dead) {
        await tx.query(
          `INSERT INTO webhook_endpoint_stats (trigger_id, consecutive_dead) VALUES ($1, 1) ON CONFLICT (trigger_id) DO UPDATE SET consecutive_dead = webhook_endpoint_stats.consecutive_dead + 1`,
          [d.trigger_id],
        );
      }
    });
    if (dead) await this.maybeAutoPause(d);
    return outcome;
  }

  private async maybeAutoPause(d: Claimed): Promise<void> {
    const { rows } = await this.db.query<{ n: number; project_id: string }>(
      `SELECT s.consecutive_dead AS n, w.project_id FROM webhook_endpoint_stats s JOIN webhook_endpoints w ON w.id = s.trigger_id WHERE s.trigger_id = $1`,
      [d.trigger_id],
    );
    const r = rows[0];
    if (!r || r.n < this.cfg.deadThreshold) return;
    await handleCommand(
      this.store,
      webhookDecider,
      webhookStream(d.trigger_id),
      { type: 'auto_pause' },
      { orgId: d.org_id, projectId: r.project_id, actor: { kind: 'system', id: DISPATCHER_NAME }, requestId: null, now: this.now },
      { serialize: true },
    );
  }
}
