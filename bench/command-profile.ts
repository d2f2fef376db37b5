import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Vault } from '../src/adapters/vault.ts';
import { buildApp } from '../src/app.ts';
import { generateSigningKey } from '../src/audit/note.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';
import { benchPostgres } from './harness.ts';

// bench/command-profile: the cost of one acknowledged command, sequentially
// (one connection, no concurrency): milliseconds per spend, and every SQL
// statement and transaction the process sent for it (the request path and
// the read side together), counted at the pg client.
// Run: npx tsx bench/command-profile.ts   (SPENDS=300; add --cpu-prof to node for a profile)

const SPENDS = Number(process.env.SPENDS ?? '300');
const counts = new Map<string, number>();
const times = new Map<string, number>();
let total = 0;
let counting = false;
const orig = pg.Client.prototype.query;
(pg.Client.prototype as unknown as { query: unknown }).query = function (this: pg.Client, ...args: unknown[]) {
  if (counting) {
    const q = args[0] as string | { text: string };
    const text = (typeof q === 'string' ? q : q.text).replace(/\s+/g, ' ').slice(0, Number(process.env.QLEN ?? 70));
    counts.set(text, (counts.get(text) ?? 0) + 1);
    total++;
    const s = process.hrtime.bigint();
    const r = (orig as (...a: unknown[]) => unknown).apply(this, args) as Promise<unknown>;
    if (r && typeof r.then === 'function') void r.then(() => times.set(text, (times.get(text) ?? 0) + Number(process.hrtime.bigint() - s) / 1e6), () => {});
    return r;
  }
  return (orig as (...a: unknown[]) => unknown).apply(this, args);
};

const pgServer = await benchPostgres();
try {
  const db = openDb(await pgServer.database('bench_profile'), { max: 10 });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit' }, undefined, { inline: process.env.INLINE !== '0' });
  const phase = { append: 0, wait: 0, n: 0 };
  const origAppend = store.appendToStream.bind(store);
  store.appendToStream = async (...a: Parameters<typeof origAppend>) => {
    const s = process.hrtime.bigint();
    try {
      return await origAppend(...a);
    } finally {
      if (counting) phase.append += Number(process.hrtime.bigint() - s) / 1e6;
    }
  };
  const origWait = readSide.waitFor;
  readSide.waitFor = async (p, ms) => {
    const s = process.hrtime.bigint();
    try {
      return await origWait(p, ms);
    } finally {
      if (counting) phase.wait += Number(process.hrtime.bigint() - s) / 1e6;
    }
  };
  const secret = 'svc_bench_secret_0123456789abcdefghijklmnop';
  const app = await buildApp({ vault: await Vault.open(db, randomBytes(32)), db, store, readSide, serviceSecret: secret, baseUrl: 'http://127.0.0.1', logLevel: 'warn', rateLimit: { burst: 1e9, perSecond: 1e9 } });
  const platform = { authorization: `Bearer ${secret}` };
  const org = (await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: 'Bench', owner_email: 'bench@example.com' } })).json();
  const key = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...platform, 'x-svc-user': org.owner.user_id }, payload: { name: 'bench', environment: 'test' } })).json().key;
  const auth = { authorization: `Bearer ${key}` };
  await app.inject({ method: 'POST', url: '/v1/agents', headers: auth, payload: { agent_id: 'buyer', principal_ref: 'p' } });
  const consumer = (await app.inject({ method: 'POST', url: '/v1/consumers', headers: auth, payload: {} })).json();
  const mandate = (
    await app.inject({
      method: 'POST',
      url: '/v1/mandates',
      headers: auth,
      payload: { consumer_id: consumer.id, agent_id: 'buyer', purpose: 'bench', merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key', cap_minor: '100000000', per_tx_cap_minor: '1000', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 86_400 },
    })
  ).json();
  const spend = () => app.inject({ method: 'POST', url: `/v1/consumers/mandates/${mandate.id}/spend`, headers: auth, payload: { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' } });
  for (let i = 0; i < 50; i++) await spend();
  await new Promise((r) => setTimeout(r, 500));
  counting = true;
  const lat: number[] = [];
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < SPENDS; i++) {
    const s = process.hrtime.bigint();
    const r = await spend();
    if (r.statusCode !== 201) throw new Error(r.body);
    lat.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  counting = false;
  lat.sort((a, b) => a - b);
  console.log(`\nbench/command-profile: ${SPENDS} sequential spends, one mandate\n`);
  console.log(`p50 ${lat[Math.floor(lat.length / 2)]!.toFixed(2)} ms   mean ${((secs * 1000) / SPENDS).toFixed(2)} ms`);
  console.log(`of which: append ${(phase.append / SPENDS).toFixed(2)} ms, waiting for the read side ${(phase.wait / SPENDS).toFixed(2)} ms`);
  const tx = (counts.get('BEGIN') ?? 0);
  console.log(`statements per command ${(total / SPENDS).toFixed(1)}   transactions (BEGIN) per command ${(tx / SPENDS).toFixed(2)}   plus autocommit statements\n`);
  for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`${(v / SPENDS).toFixed(2).padStart(7)}  ${((times.get(k) ?? 0) / SPENDS).toFixed(2).padStart(6)} ms  ${k}`);
  await app.close();
  await readSide.stop();
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
