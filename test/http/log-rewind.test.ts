import t from 'tap';
import pg from 'pg';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';
import type { Db } from '../../src/postgres/db.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { durabilityWarnings } from '../../src/postgres/durability.ts';

// When the database goes backwards (issue 46). A PostgreSQL with
// synchronous_commit=off, or a failover to an asynchronous standby, comes
// back at an earlier WAL point: every table as it stood at one commit, the
// later acknowledged commits gone. Simulated faithfully: every table of the
// database copied in one REPEATABLE READ transaction (one consistent point,
// as a WAL position is), and later put back in one transaction behind the
// service's back, which stays up. The instance must notice, refuse writes
// with 503 (never 500) while it reloads, report not ready and an incident with
// the evidence, and then acknowledge spends again without a restart.

const { app, ledger } = await testApp(t);
const base = await app.listen({ host: '127.0.0.1', port: 0 });
const org = await bootstrapOrg(app, 'Rewind');
const inject = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) =>
  app.inject({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });
await inject('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
const consumer = (await inject('POST', '/v1/consumers', { display_name: 'Ana' })).json();
const mandate = (
  await inject('POST', '/v1/mandates', {
    consumer_id: consumer.id,
    agent_id: 'buyer',
    purpose: 'groceries',
    merchant_allowlist: ['shop@pix.example'],
    merchant_pin_kind: 'pix-key',
    cap_minor: '1000000',
    per_tx_cap_minor: '1000',
    currency: 'BRL',
    expires_at: Math.floor(Date.now() / 1000) + 86_400,
  })
).json();

type Answer = { status: number; body: { transaction_id?: string; error?: { code: string; details?: { retriable?: boolean } } } };
/** A spend of 10 over real HTTP. */
const spend = async (): Promise<Answer> => {
  const r = await fetch(`${base}/v1/consumers/mandates/${mandate.id}/spend`, {
    method: 'POST',
    headers: { ...org.key, 'content-type': 'application/json' },
    body: JSON.stringify({ amount_minor: '10', currency: 'BRL', merchant: 'shop@pix.example' }),
  });
  return { status: r.status, body: (await r.json()) as Answer['body'] };
};
const readyz = async () => {
  const r = await fetch(`${base}/readyz`);
  return { status: r.status, body: (await r.json()) as { status: string; reason?: string } };
};

/** The public tables' columns that take values (generated ones excluded). */
async function tables(db: Db): Promise<Map<string, string[]>> {
  const { rows } = await db.query<{ table_name: string; column_name: string }>(
    `SELECT c.table_name, c.column_name FROM information_schema.columns c JOIN pg_tables p ON p.schemaname = 'public' AND p.tablename = c.table_name
     WHERE c.table_schema = 'public' AND c.is_generated = 'NEVER' ORDER BY c.table_name, c.ordinal_position`,
  );
  const m = new Map<string, string[]>();
  for (const r of rows) m.set(r.table_name, [...(m.get(r.table_name) ?? []), `"${r.column_name}"`]);
  return m;
}

/** Every table (and sequence) as of one commit, into schema `snap`. */
async function snapshot(db: Db): Promise<void> {
  await db.query('DROP SCHEMA IF EXISTS snap CASCADE');
  await db.query('CREATE SCHEMA snap');
  const list = await tables(db);
  await db.transaction(
    async (tx) => {
      for (const [name, cols] of list) await tx.query(`CREATE TABLE snap."${name}" AS SELECT ${cols.join(', ')} FROM public."${name}"`);
      await tx.query(`CREATE TABLE snap._sequences AS SELECT schemaname || '.' || sequencename AS name, last_value FROM pg_sequences WHERE schemaname = 'public'`);
    },
    { isolation: 'repeatable read' },
  );
}

/**
 * The database back at the snapshot's commit, in one transaction (the service
 * waits on its locks meanwhile). The TRUNCATE takes every table's lock in turn
 * while a transaction of the service's background work (on timers, which
 * settle does not wait for) may hold one of the tables and want another:
 * PostgreSQL then aborts one of the two (40P01). The restore was the one
 * aborted in a CI run; its transaction then did nothing, and it runs again.
 */
async function restore(url: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'snap' AND table_name <> '_sequences'`);
    for (let attempt = 1; ; attempt++) {
      try {
        await c.query('BEGIN');
        // A restore writes rows as they were, not appends: the audit chain's guard on new facts does not apply.
        await c.query(`SELECT set_config('es.writer', '2', true)`);
        await c.query(`TRUNCATE ${rows.map((r) => `public."${r.table_name}"`).join(', ')}`);
        for (const r of rows) {
          const cols = (await c.query<{ column_name: string }>(`SELECT column_name FROM information_schema.columns WHERE table_schema = 'snap' AND table_name = $1 ORDER BY ordinal_position`, [r.table_name])).rows.map((x) => `"${x.column_name}"`);
          await c.query(`INSERT INTO public."${r.table_name}" (${cols.join(', ')}) SELECT ${cols.join(', ')} FROM snap."${r.table_name}"`);
        }
        await c.query(`SELECT setval(name, last_value) FROM snap._sequences WHERE last_value IS NOT NULL`);
        await c.query('COMMIT');
        return;
      } catch (err) {
        await c.query('ROLLBACK').catch(() => {});
        if ((err as { code?: string }).code !== '40P01' || attempt >= 5) throw err;
      }
    }
  } finally {
    await c.end();
  }
}

const spentInReadModel = async () => Number((await ledger.db.query<{ spent: string }>('SELECT spent_minor::text AS spent FROM mandates WHERE id = $1', [mandate.id])).rows[0]!.spent);
const approvedInLog = async () =>
  (await ledger.store.readStream(`mandate-${mandate.id}`)).filter((e) => e.type === 'mandate.spend_approved').map((e) => ({ id: e.id, tx: (e.data as { transaction_id: string }).transaction_id }));

t.test('the database loses acknowledged spends: noticed, 503 while reloading, not ready, an incident, then spends again without a restart', async (t) => {
  const store = ledger.store as PostgresEventStore;
  const recovery = ledger.readSide.recovery!;
  t.ok(recovery, 'the Postgres store has a recovery');
  for (let i = 0; i < 5; i++) t.equal((await spend()).status, 201);
  await ledger.settle();
  await snapshot(ledger.db);
  // Acknowledged, then lost with the WAL the database comes back without.
  const doomed = await Promise.all(Array.from({ length: 8 }, () => spend()));
  t.same(doomed.map((r) => r.status), Array(8).fill(201), 'acknowledged');
  await ledger.settle();
  const knownHead = await store.headPosition();
  t.equal(await spentInReadModel(), 130);

  // Held in recovery until released, to look at the instance meanwhile.
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let held = false;
  recovery.hold = async () => {
    held = true;
    await released;
  };
  await restore(ledger.url);

  // The next spend notices (its append finds the log's head behind what was acknowledged): refused, nothing written.
  const first = await spend();
  t.equal(first.status, 503, 'the first spend after the loss');
  t.match(first.body.error, { code: 'store_recovering', details: { retriable: true } });
  await until(() => held, 'the recovery under way');
  const during = await Promise.all(Array.from({ length: 10 }, () => spend()));
  t.same(during.map((r) => r.status), Array(10).fill(503), 'every spend while reloading: 503');
  t.ok(during.every((r) => r.body.error?.code === 'store_recovering' && r.body.error.details?.retriable === true), 'store_recovering, retriable');
  const notReady = await readyz();
  t.equal(notReady.status, 503, '/readyz: not ready');
  t.match(notReady.body, { status: 'not_ready', reason: /behind position/ });
  t.match(store.recovering, { knownHead, where: 'append' }, 'the evidence: the head acknowledged here');
  t.ok(store.recovering!.databaseHead < knownHead, 'and the database behind it');

  release();
  // Spends are acknowledged again without a restart: meanwhile only 503s, never a 500.
  const after: Answer[] = [];
  await until(async () => {
    const r = await spend();
    after.push(r);
    return r.status === 201;
  }, 'a spend acknowledged again');
  t.ok(after.every((r) => r.status === 201 || (r.status === 503 && r.body.error?.details?.retriable === true)), `only 503 retriable before the first 201 (${after.map((r) => r.status).join(',')})`);
  const burst = await Promise.all(Array.from({ length: 12 }, () => spend()));
  t.same(burst.map((r) => r.status), Array(12).fill(201), 'a burst of concurrent spends, all acknowledged');
  t.equal((await readyz()).status, 200, '/readyz: ready again');

  // Every spend acknowledged after the recovery is in the log, the read model and the chain; the lost ones are not.
  const acknowledged = [...after, ...burst].filter((r) => r.status === 201).map((r) => r.body.transaction_id!);
  await ledger.settle();
  const inLog = await approvedInLog();
  const txs = new Set(inLog.map((e) => e.tx));
  t.ok(acknowledged.every((id) => txs.has(id)), 'each acknowledged spend is in the log');
  t.equal(inLog.length, 5 + acknowledged.length, 'the 5 before the snapshot and those acknowledged since: the lost 8 are gone');
  t.notOk(doomed.some((r) => txs.has(r.body.transaction_id!)), 'the lost spends are not in the log');
  t.equal(await spentInReadModel(), 10 * (5 + acknowledged.length), 'the read model adds up');
  const card = (await inject('GET', `/v1/consumers/mandates/${mandate.id}/card`)).json() as { authorizations: { transaction_id: string; decision: string }[] };
  const onCard = new Set(card.authorizations.map((a) => a.transaction_id));
  t.ok(acknowledged.every((id) => onCard.has(id)), 'each on the mandate card');
  const wallet = (await inject('GET', `/v1/consumers/${consumer.id}/wallet`)).json() as { currencies: { currency: string; mandate_ids: string[] }[] };
  t.ok(wallet.currencies.find((c) => c.currency === 'BRL')?.mandate_ids.includes(mandate.id), 'the mandate in the wallet');
  const sealed = (await ledger.store.readStream(`audit-${org.orgId}`, { maxCount: 10_000 })).map((e) => (e.data as { source: { event_id: string } }).source.event_id);
  const sources = new Set(sealed);
  t.ok(inLog.every((e) => sources.has(e.id)), 'each spend sealed in the chain');
  const report = await ledger.readSide.verifier.verifyOrg(org.orgId);
  t.equal(report.ok, true, `the chain verifies from its start (${JSON.stringify(report.problems.slice(0, 2))})`);

  // Said so: an incident with the evidence, health broken until a person acknowledges it.
  await recovery.settled();
  await ledger.settle();
  const incidents = (await inject('GET', '/v1/audit-events/incidents')).json().incidents as { id: string; kind: string; detail: string; status: string }[];
  const incident = incidents.find((i) => i.kind === 'log_rewound');
  t.ok(incident, 'a log_rewound incident is open');
  t.match(incident!.detail, new RegExp(`ended at position ${Number(knownHead)} as seen acknowledged here`), 'evidence: the head acknowledged here');
  t.match(incident!.detail, /last signed checkpoint known here: size \d+, root [0-9a-f]{64}/, 'evidence: the signed checkpoint known here');
  t.match(incident!.detail, /synchronous_commit/);
  const health = (await inject('GET', '/v1/audit-events/health')).json();
  t.match(health, { status: 'degraded', actionable_status: 'broken', detail: /lost writes this service had acknowledged/ });
  const ack = await inject('POST', `/v1/audit-events/incidents/${incident!.id}/acknowledge`, { personal_data_affected: false, resolution_summary: 'synchronous_commit set back to on', anpd_notification_status: 'not_required' }, org.owner);
  t.equal(ack.statusCode, 200);
  await ledger.settle();
  const later = (await inject('GET', '/v1/audit-events/health')).json();
  t.not(later.actionable_status, 'broken', 'acknowledged: no longer broken for it');
  t.equal(recovery.history.length, 1, 'one rewind');
  t.ok(recovery.history[0]!.healedAt, 'healed');
});

t.test('the database connections terminated under concurrent spends (nothing lost): no 500, every acknowledged spend kept, spends right after', async (t) => {
  const before = (await approvedInLog()).length;
  const answers: Answer[] = [];
  const killer = (async () => {
    for (let i = 0; i < 3; i++) {
      await until(() => answers.length >= 4 * (i + 1), 'spends in flight');
      const c = new pg.Client({ connectionString: ledger.url });
      await c.connect();
      await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      await c.end();
    }
  })();
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 10; i++) answers.push(await spend());
    }),
  );
  await killer;
  t.notOk(answers.some((r) => r.status >= 500 && r.status !== 503), `no 500 (${answers.map((r) => r.status).join(',')})`);
  t.ok(answers.every((r) => r.status === 201 || r.status === 503), 'acknowledged or 503');
  const r = await until(async () => {
    const x = await spend();
    answers.push(x);
    return x.status === 201 ? x : undefined;
  }, 'a spend acknowledged after the restarts');
  t.ok(r);
  await ledger.settle();
  const inLog = new Set((await approvedInLog()).map((e) => e.tx));
  const acknowledged = answers.filter((a) => a.status === 201).map((a) => a.body.transaction_id!);
  t.ok(acknowledged.every((id) => inLog.has(id)), 'every acknowledged spend is in the log: nothing lost');
  t.ok(inLog.size >= before + acknowledged.length, 'none missing');
  t.equal(ledger.readSide.recovery!.history.length, 1, 'no rewind noticed: nothing went backwards');
});

t.test('the settings that make acknowledgements not durable are named at start', async (t) => {
  const { rows } = await ledger.db.query<{ fsync: string; sc: string }>(`SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sc`);
  const warnings = await durabilityWarnings(ledger.db);
  // The test cluster runs with both off (src/postgres/embedded.ts, durable: false).
  t.equal(warnings.some((w) => /fsync=off/.test(w)), rows[0]!.fsync === 'off');
  t.equal(warnings.some((w) => /synchronous_commit=off/.test(w)), rows[0]!.sc === 'off');
  t.ok(warnings.length > 0, 'this cluster is not durable: warned');
});
