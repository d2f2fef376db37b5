import t from 'tap';
import { interactionDecider, interactionStream, negotiationDecider, negotiationStream } from '../../commands/commerce-memory.ts';
import { handleCommand } from '../../src/eventstore/handler.ts';
import { newId } from '../../src/ids.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// The three insights over a generated data set (thousands of interactions over
// fourteen months, several currencies, payments with and without amounts,
// negotiations with and without prices), appended through the command handler
// and projected by the running projections, checked against a computation
// made here from the generated rows, over many windows: aligned to days and
// months or not, shorter than a day, crossing years.

const { app, ledger } = await testApp(t);
const org = await bootstrapOrg(app, 'Insights');
const stranger = await bootstrapOrg(app, 'Noise');

// A deterministic generator (mulberry32), so a failure reproduces.
let seed = 0x5eed;
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
};
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;

const KINDS = ['supplier', 'customer', 'agent_peer'] as const;
const IX_KINDS = ['quote', 'negotiation', 'order', 'invoice', 'payment', 'payment', 'payment', 'shipment', 'message', 'other'] as const;
const CURRENCIES = ['BRL', 'USD', 'MXN', 'USDC'] as const;
const OUTCOMES = ['agreed', 'accepted', 'rejected', 'abandoned'] as const;
const START = Date.parse('2025-06-01T00:00:00.000Z');
const SPAN = Date.parse('2026-08-01T00:00:00.000Z') - START;

/** A time: mostly uniform, sometimes exactly on a day or month boundary (the edges of the buckets). */
function instant(): number {
  const r = rand();
  const at = START + Math.floor(rand() * SPAN);
  if (r < 0.1) return Math.floor(at / 86_400_000) * 86_400_000;
  if (r < 0.15) {
    const d = new Date(at);
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  }
  if (r < 0.18) return Math.floor(at / 86_400_000) * 86_400_000 - 1;
  return at;
}

type Cp = { id: string; kind: string; name: string; identifier_kind: string | null; created_at: string };
type Ix = { cp: Cp; kind: string; at: number; amount: bigint | null; currency: string | null };
type Ng = { item: string; outcome: string; at: number; currency: string | null; list: bigint | null; final: bigint | null };

const cps: Cp[] = [];
for (let i = 0; i < 36; i++) {
  const body = i % 3 === 0 ? { kind: pick(KINDS), name: `Cp ${i}`, identifier: `cp${i}@example.com`, identifier_kind: 'email' } : { kind: pick(KINDS), name: `Cp ${i}` };
  const r = await app.inject({ method: 'POST', url: '/v1/counterparties', headers: org.key, payload: body });
  cps.push(r.json());
}
const noiseCp = (await app.inject({ method: 'POST', url: '/v1/counterparties', headers: stranger.key, payload: { kind: 'supplier', name: 'Noise' } })).json();

const N = 4000;
const ixs: Ix[] = [];
for (let i = 0; i < N; i++) {
  const kind = pick(IX_KINDS);
  const priced = rand() < (kind === 'payment' ? 0.9 : 0.3);
  // A few counterparties get most of the traffic, so rankings have a shape.
  const cp = rand() < 0.5 ? cps[Math.floor(rand() * 6)]! : pick(cps);
  ixs.push({ cp, kind, at: instant(), amount: priced ? BigInt(1 + Math.floor(rand() * 5_000_000)) : null, currency: priced ? pick(CURRENCIES) : null });
}
const ngs: Ng[] = [];
for (let i = 0; i < 900; i++) {
  const priced = rand() < 0.8;
  const list = priced && rand() < 0.95 ? BigInt(Math.floor(rand() * 100_000)) : null;
  const final = priced && rand() < 0.9 ? (list !== null ? (list * BigInt(70 + Math.floor(rand() * 40))) / 100n : BigInt(Math.floor(rand() * 1000))) : null;
  ngs.push({ item: `sku-${Math.floor(rand() * 5)}`, outcome: pick(OUTCOMES), at: instant(), currency: priced ? pick(CURRENCIES) : null, list, final });
}

/** Appends through the command handler, sixteen at a time, as the routes would. */
async function appendAll<T>(items: T[], one: (x: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += 16) await Promise.all(items.slice(i, i + 16).map(one));
}
const ctx = { ...ledger.ctx(org.orgId), projectId: org.projectId, actor: { kind: 'system' as const, id: 'generator' }, now: () => new Date() };
await appendAll(ixs, (x) => {
  const id = newId('ixn');
  return handleCommand(ledger.store, interactionDecider, interactionStream(id), {
    type: 'record',
    interaction: {
      interaction_id: id,
      org_id: org.orgId,
      project_id: org.projectId,
      counterparty_id: x.cp.id,
      counterparty_kind: x.cp.kind as 'supplier',
      kind: x.kind as 'payment',
      occurred_at: new Date(x.at).toISOString(),
      source: 'backfill',
      source_ref: null,
      agent_id: null,
      amount_minor: x.amount === null ? null : x.amount.toString(),
      currency: x.currency,
      metadata: {},
    },
  }, ctx);
});
await appendAll(ngs, (x) => {
  const id = newId('neg');
  return handleCommand(ledger.store, negotiationDecider, negotiationStream(id), {
    type: 'record',
    negotiation: {
      negotiation_id: id,
      org_id: org.orgId,
      project_id: org.projectId,
      counterparty_id: pick(cps).id,
      item_ref: x.item,
      outcome: x.outcome as 'accepted',
      currency: x.currency,
      list_price_minor: x.list === null ? null : x.list.toString(),
      final_price_minor: x.final === null ? null : x.final.toString(),
      started_at: new Date(x.at).toISOString(),
      ended_at: null,
      metadata: {},
    },
  }, ctx);
});
// Another organization's activity in the same windows must not count.
for (let i = 0; i < 50; i++) {
  await app.inject({ method: 'POST', url: '/v1/commerce-memory/interactions', headers: stranger.key, payload: { counterparty_id: noiseCp.id, kind: 'payment', amount_minor: 7, currency: 'BRL', occurred_at: new Date(instant()).toISOString() } });
  await app.inject({ method: 'POST', url: '/v1/commerce-memory/negotiations', headers: stranger.key, payload: { counterparty_id: noiseCp.id, item_ref: 'sku-1', outcome: 'accepted', started_at: new Date(instant()).toISOString() } });
}
await ledger.settle();

// ---------------------------------------------------------------------------
// The independent computation.

const lastSeen = new Map<string, string>();
for (const c of cps) lastSeen.set(c.id, c.created_at);
for (const x of ixs) {
  const iso = new Date(x.at).toISOString();
  if (iso > lastSeen.get(x.cp.id)!) lastSeen.set(x.cp.id, iso);
}
const byId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function expectSummary(since: number, until: number, kind?: string, limit = 200) {
  const acc = new Map<string, { n: number; p: number; s: bigint; cur: Set<string> }>();
  for (const x of ixs) {
    if (x.at < since || x.at >= until || (kind && x.cp.kind !== kind)) continue;
    const a = acc.get(x.cp.id) ?? { n: 0, p: 0, s: 0n, cur: new Set<string>() };
    a.n++;
    if (x.kind === 'payment') {
      a.p++;
      a.s += x.amount ?? 0n;
    }
    if (x.currency) a.cur.add(x.currency);
    acc.set(x.cp.id, a);
  }
  return [...acc]
    .sort(([ia, a], [ib, b]) => b.n - a.n || byId(ia, ib))
    .slice(0, limit)
    .map(([id, a]) => {
      const c = cps.find((x) => x.id === id)!;
      return { counterparty_id: id, name: c.name, kind: c.kind, identifier_kind: c.identifier_kind, last_seen_at: lastSeen.get(id)!, interaction_count: a.n, payment_count: a.p, total_payment_minor: Number(a.s), currencies: [...a.cur].sort() };
    });
}

function expectTop(since: number, until: number, kind?: string, limit = 200) {
  const acc = new Map<string, { p: number; s: bigint }>();
  for (const x of ixs) {
    if (x.at < since || x.at >= until || (kind && x.cp.kind !== kind) || x.kind !== 'payment') continue;
    const a = acc.get(x.cp.id) ?? { p: 0, s: 0n };
    a.p++;
    a.s += x.amount ?? 0n;
    acc.set(x.cp.id, a);
  }
  return [...acc]
    .sort(([ia, a], [ib, b]) => b.p - a.p || (b.s > a.s ? 1 : b.s < a.s ? -1 : 0) || byId(ia, ib))
    .slice(0, limit)
    .map(([id, a]) => {
      const c = cps.find((x) => x.id === id)!;
      return { counterparty_id: id, name: c.name, kind: c.kind, payment_count: a.p, total_payment_minor: Number(a.s) };
    });
}

function expectStats(since: number, until: number, item?: string) {
  const acc = new Map<string, { n: number; cur: Set<string>; dn: number; ds: bigint }>();
  for (const x of ngs) {
    if (x.at < since || x.at >= until || (item !== undefined && x.item !== item)) continue;
    const a = acc.get(x.outcome) ?? { n: 0, cur: new Set<string>(), dn: 0, ds: 0n };
    a.n++;
    if (x.currency) a.cur.add(x.currency);
    if (x.list !== null && x.final !== null && x.list > 0n) {
      // Basis points of the list price, rounded down (towards minus infinity).
      const num = (x.list - x.final) * 10_000n;
      let q = num / x.list;
      if (num % x.list !== 0n && num < 0n) q -= 1n;
      a.dn++;
      a.ds += q;
    }
    acc.set(x.outcome, a);
  }
  return [...acc]
    .sort(([a], [b]) => byId(a, b))
    .map(([outcome, a]) => {
      // The average rounded half away from zero.
      const avg = a.dn === 0 ? null : Number(a.ds < 0n ? -((-a.ds * 2n + BigInt(a.dn)) / (2n * BigInt(a.dn))) : (a.ds * 2n + BigInt(a.dn)) / (2n * BigInt(a.dn)));
      return { outcome, n: a.n, currencies: [...a.cur].sort(), discount_sample_n: a.dn, avg_discount_bps: avg };
    });
}

const windows: [string, string][] = [
  ['2025-01-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z'], // everything
  ['2025-07-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z'], // whole months only
  ['2025-07-03T00:00:00.000Z', '2025-09-17T00:00:00.000Z'], // whole days, months inside
  ['2025-07-03T00:00:00.000Z', '2025-07-29T00:00:00.000Z'], // whole days within one month
  ['2025-12-31T23:59:59.999Z', '2026-01-01T00:00:00.001Z'], // two milliseconds across a year
  ['2026-02-10T06:30:00.000Z', '2026-02-10T18:45:00.000Z'], // inside one day
  ['2026-02-10T06:30:00.000Z', '2026-02-11T00:00:00.000Z'], // a partial day up to midnight
];
for (let i = 0; i < 10; i++) {
  const a = START + Math.floor(rand() * SPAN);
  const b = a + 1 + Math.floor(rand() * (START + SPAN - a));
  windows.push([new Date(a).toISOString(), new Date(b).toISOString()]);
}

const get = async (url: string) => {
  const r = await app.inject({ method: 'GET', url, headers: org.key });
  if (r.statusCode !== 200) throw new Error(`${url}: ${r.statusCode} ${r.body}`);
  return r.json();
};

t.test('the generated data set is all there', async (t) => {
  const { rows } = await ledger.db.query<{ n: string }>('SELECT count(*)::text AS n FROM interactions WHERE project_id = $1', [org.projectId]);
  t.equal(Number(rows[0]!.n), N);
  t.ok(new Set(ixs.map((x) => x.currency)).size >= 5, 'several currencies and none');
});

for (const [since, until] of windows) {
  t.test(`window [${since}, ${until})`, async (t) => {
    const s = Date.parse(since);
    const u = Date.parse(until);
    const q = `since=${since}&until=${until}`;
    const summary = await get(`/v1/commerce-memory/insights/counterparty-summary?${q}&limit=200`);
    t.same(summary, { window: { since, until }, rows: expectSummary(s, u) }, 'counterparty-summary');
    const kind = pick(KINDS);
    t.same((await get(`/v1/commerce-memory/insights/counterparty-summary?${q}&kind=${kind}&limit=5`)).rows, expectSummary(s, u, kind, 5), `counterparty-summary kind=${kind} limit=5`);
    t.same(await get(`/v1/commerce-memory/insights/top-counterparties?${q}&limit=200`), { kind: null, window: { since, until }, rows: expectTop(s, u) }, 'top-counterparties');
    t.same(await get(`/v1/commerce-memory/insights/top-counterparties?${q}&kind=${kind}&limit=3`), { kind, window: { since, until }, rows: expectTop(s, u, kind, 3) }, `top-counterparties kind=${kind}`);
    t.same(await get(`/v1/commerce-memory/insights/negotiation-stats?${q}`), { item_ref: null, window: { since, until }, rows: expectStats(s, u) }, 'negotiation-stats');
    t.same(await get(`/v1/commerce-memory/insights/negotiation-stats?${q}&item_ref=sku-2`), { item_ref: 'sku-2', window: { since, until }, rows: expectStats(s, u, 'sku-2') }, 'negotiation-stats item_ref=sku-2');
  });
}

t.test('default window: the 90 days up to now', async (t) => {
  const before = Date.now();
  const r = await get('/v1/commerce-memory/insights/top-counterparties');
  const until = Date.parse(r.window.until);
  t.ok(until >= before && until <= Date.now());
  t.equal(until - Date.parse(r.window.since), 90 * 86_400_000);
  const onlySince = await get('/v1/commerce-memory/insights/counterparty-summary?since=2025-06-01T00:00:00Z');
  t.equal(onlySince.window.since, '2025-06-01T00:00:00.000Z');
  t.same(onlySince.rows, expectSummary(START, Date.parse(onlySince.window.until), undefined, 20), 'limit defaults to 20');
});

t.test('bad windows are invalid_query with issues', async (t) => {
  for (const q of ['since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z', 'since=2026-01-01T00:00:00Z&until=2026-01-01T00:00:00Z', 'since=tomorrow', 'until=2026-13-01T00:00:00Z', 'limit=0', 'kind=vendor']) {
    for (const path of ['counterparty-summary', 'top-counterparties', 'negotiation-stats']) {
      if (path === 'negotiation-stats' && /limit|kind/.test(q)) continue;
      const r = await app.inject({ method: 'GET', url: `/v1/commerce-memory/insights/${path}?${q}`, headers: org.key });
      t.equal(r.statusCode, 400, `${path}?${q}`);
      t.equal(r.json().error.code, 'invalid_query');
      t.ok(r.json().error.details.issues.length > 0);
    }
  }
});

t.test('a rebuild from the log gives the same buckets', async (t) => {
  const dump = async () => {
    const out: Record<string, unknown> = {};
    for (const table of ['counterparty_daily', 'counterparty_monthly', 'negotiation_daily', 'negotiation_monthly']) {
      out[table] = (await ledger.db.query(`SELECT * FROM ${table} AS t ORDER BY t::text COLLATE "C"`)).rows;
    }
    return out;
  };
  const live = await dump();
  t.ok((live.counterparty_daily as unknown[]).length > 1000, 'buckets to compare');
  const { rebuildProjection } = await import('../../src/projector/runner.ts');
  const { commerceMemoryProjection } = await import('../../projections/commerce-memory.ts');
  await rebuildProjection(ledger.db, ledger.store, commerceMemoryProjection);
  t.same(await dump(), live);
});
