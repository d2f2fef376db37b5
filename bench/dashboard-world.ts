import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.ts';
import { Vault } from '../src/adapters/vault.ts';
import { generateSigningKey } from '../src/audit/note.ts';
import { Sessions, SESSION_COOKIE } from '../src/dashboard/session.ts';
import type { EventStore } from '../src/eventstore/port.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb, type Db } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';

// The world bench/dashboard measures in: one service (app.inject, no sockets)
// on a durable PostgreSQL, and per page case an organization of its own with
// its owner's three credentials: an API key, the platform secret with
// x-svc-user, and a dashboard session.

export type Headers = Record<string, string>;

export type Org = {
  orgId: string;
  ownerId: string;
  projectId: string;
  /** The test-environment API key (Bearer). */
  key: Headers;
  /** The platform secret with x-svc-user: the owner through service auth. */
  svc: Headers;
  /** The owner's dashboard session cookie. */
  cookie: Headers;
  /** POST with the API key (or `headers`); the parsed body; throws unless 2xx. */
  post(url: string, payload: unknown, headers?: Headers): Promise<any>;
};

export type World = {
  app: FastifyInstance;
  db: Db;
  store: EventStore;
  /** A fresh organization with its owner signed in. */
  organization(name: string): Promise<Org>;
  /** Runs make(0..n-1), `concurrency` at a time, printing progress to stderr. */
  many(what: string, n: number, make: (i: number) => Promise<unknown>, concurrency?: number): Promise<void>;
  /**
   * Brings `table` to `rows` rows of the organization by copying the rows it
   * has (made through the API, so their shape is real) in SQL: `vary` gives,
   * per column, the expression of a copy's value from the source row `src`
   * and the copy's number `g` (ids and times must differ); every other column
   * is copied as it is. Returns the rows the organization has then.
   */
  multiply(table: string, orgId: string, rows: number, vary: Record<string, string>): Promise<number>;
  close(): Promise<void>;
};

/**
 * A page the bench measures: `seed` brings `table` (the read-model table the
 * page lists) to `rows` rows for the organization and names the page and the
 * API list answering the same rows; both must answer 200 with the rows the
 * counters find before anything is timed.
 */
export type PageCase = {
  name: string;
  table: string;
  /** Rows to seed; the bench's ROWS (100 000) when absent. */
  rows?: number;
  seed(world: World, org: Org, rows: number): Promise<{ page: string; api: string; apiHeaders: Headers }>;
  /** Rows the page lists (e.g. matches of a data attribute). */
  pageRows(html: string): number;
  /** Rows the API's answer lists. */
  apiRows(json: any): number;
};

export async function openWorld(url: string): Promise<World> {
  const db = openDb(url, { max: 20 });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit' });
  const secret = 'svc_bench_secret_0123456789abcdefghijklmnop';
  const app = await buildApp({ vault: await Vault.open(db, randomBytes(32)), db, store, readSide, serviceSecret: secret, baseUrl: 'http://127.0.0.1:8080', logLevel: 'warn', rateLimit: { burst: 1e9, perSecond: 1e9 } });
  const platform = { authorization: `Bearer ${secret}` };
  const call = async (method: 'POST' | 'GET', url: string, headers: Headers, payload?: unknown) => {
    const res = await app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
    if (res.statusCode < 200 || res.statusCode > 299) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body.slice(0, 300)}`);
    return res.body ? res.json() : undefined;
  };
  const sessions = new Sessions(db, () => new Date());
  return {
    app,
    db,
    store,
    async organization(name) {
      const email = `owner@${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}.example`;
      const org = await call('POST', '/v1/orgs', platform, { name, owner_email: email });
      const svc = { ...platform, 'x-svc-user': org.owner.user_id as string };
      const key = { authorization: `Bearer ${(await call('POST', '/v1/api-keys', svc, { name: 'bench', environment: 'test' })).key}` };
      const session = await sessions.create({ email, userId: org.owner.user_id, orgId: org.org.id, projectId: org.default_project.id });
      return {
        orgId: org.org.id,
        ownerId: org.owner.user_id,
        projectId: org.default_project.id,
        key,
        svc,
        cookie: { cookie: `${SESSION_COOKIE}=${session.secret}` },
        post: (url, payload, headers = key) => call('POST', url, headers, payload),
      };
    },
    async many(what, n, make, concurrency = 32) {
      let next = 0;
      let done = 0;
      const t0 = Date.now();
      let shown = t0;
      await Promise.all(
        Array.from({ length: Math.min(concurrency, n) }, async () => {
          while (next < n) {
            await make(next++);
            done++;
            if (Date.now() - shown > 5000) {
              shown = Date.now();
              process.stderr.write(`  ${what}: ${done}/${n} (${Math.round(done / ((shown - t0) / 1000))}/s)\n`);
            }
          }
        }),
      );
    },
    async multiply(table, orgId, rows, vary) {
      const count = async () => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE org_id = $1`, [orgId])).rows[0]!.n);
      const have = await count();
      if (have === 0) throw new Error(`${table} has no row of the organization to copy`);
      const copies = Math.ceil((rows - have) / have);
      if (copies <= 0) return have;
      const { rows: cols } = await db.query<{ column_name: string }>('SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position', [table]);
      const names = cols.map((c) => c.column_name);
      const values = names.map((n) => vary[n] ?? `src.${n}`);
      // In slices of 20 000 rows, each its own statement.
      const per = Math.max(1, Math.floor(20_000 / have));
      for (let from = 1; from <= copies; from += per) {
        const to = Math.min(copies, from + per - 1);
        await db.query(`INSERT INTO ${table} (${names.join(', ')}) SELECT ${values.join(', ')} FROM (SELECT * FROM ${table} WHERE org_id = $1 LIMIT $2) src, generate_series($3::int, $4::int) g`, [orgId, have, from, to]);
      }
      await db.query(`ANALYZE ${table}`);
      return count();
    },
    async close() {
      await app.close();
      await readSide.stop();
      await store.close();
      await db.close();
    },
  };
}

/**
 * An agent (`buyer`) of the organization with a consumer's BRL mandate to
 * spend at `shop` for a month (a large total cap, 1 000.00 a spend): what the
 * cases that need spends start from. `spend(i)` asks one spend through the API
 * (its raw answer: a policy may hold or refuse it).
 */
export async function spendingAgent(world: World, org: Org) {
  await org.post('/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
  const consumer = await org.post('/v1/consumers', { display_name: 'Ana' });
  const mandate = await org.post('/v1/mandates', {
    consumer_id: consumer.id, agent_id: 'buyer', purpose: 'bench', merchant_allowlist: ['shop'], merchant_pin_kind: 'merchant-id',
    cap_minor: '100000000000', per_tx_cap_minor: '100000', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 86_400 * 30,
  });
  const spend = (i: number) => world.app.inject({ method: 'POST', url: `/v1/consumers/mandates/${mandate.id}/spend`, headers: org.key, payload: { amount_minor: String(100 + (i % 1000)), currency: 'BRL', merchant: 'shop' } });
  return { consumer, mandate, spend };
}
