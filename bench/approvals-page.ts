import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { buildApp } from '../src/app.ts';
import { Vault } from '../src/adapters/vault.ts';
import { generateSigningKey } from '../src/audit/note.ts';
import { Sessions, SESSION_COOKIE } from '../src/dashboard/session.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';
import { benchPostgres } from './harness.ts';

// bench/approvals-page: server time per request of the dashboard's Approvals
// page listing 50 pending approvals (a person's session, the queue and the
// history read, the whole page rendered by preact-render-to-string) beside
// GET /v1/approvals?status=pending&limit=50 for the same 50 rows (an API key,
// zod on the way out), measured in the same run, in alternating rounds,
// through app.inject (the server's own time: no sockets, one request at a
// time). Prints p50 and p99 of each and their ratio.
// Run: npm run bench:approvals-page   (ROUNDS=5, PER_ROUND=200, WARMUP=200)

const rounds = Number(process.env.ROUNDS ?? '5');
const perRound = Number(process.env.PER_ROUND ?? '200');
const warmup = Number(process.env.WARMUP ?? '200');

const pgServer = await benchPostgres();
try {
  const db = openDb(await pgServer.database('bench_approvals_page'), { max: 10 });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit' });
  const secret = 'svc_bench_secret_0123456789abcdefghijklmnop';
  const app = await buildApp({ vault: await Vault.open(db, randomBytes(32)), db, store, readSide, serviceSecret: secret, baseUrl: 'http://127.0.0.1', logLevel: 'warn', rateLimit: { burst: 1e9, perSecond: 1e9 } });
  const platform = { authorization: `Bearer ${secret}` };
  const org = (await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: 'Bench', owner_email: 'bench@example.com' } })).json();
  const key = { authorization: `Bearer ${(await app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...platform, 'x-svc-user': org.owner.user_id }, payload: { name: 'bench', environment: 'test' } })).json().key}` };
  const post = async (url: string, payload: Record<string, unknown>) => (await app.inject({ method: 'POST', url, headers: key, payload })).json();
  await post('/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
  const consumer = await post('/v1/consumers', { display_name: 'Ana' });
  const mandate = await post('/v1/mandates', { consumer_id: consumer.id, agent_id: 'buyer', purpose: 'bench', merchant_allowlist: ['shop'], merchant_pin_kind: 'merchant-id', cap_minor: '10000000', per_tx_cap_minor: '100000', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 86_400 });
  await post('/v1/policies', { name: 'a person decides', type: 'approval-required', config: { approval_ttl_seconds: 86_400 } });
  for (let i = 0; i < 50; i++) await post(`/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: String(100 + i), currency: 'BRL', merchant: 'shop' });
  const session = await new Sessions(db, () => new Date()).create({ email: 'bench@example.com', userId: org.owner.user_id, orgId: org.org.id, projectId: org.default_project.id });
  const cookie = { cookie: `${SESSION_COOKIE}=${session.secret}` };

  const targets = [
    { name: 'GET /dashboard/approvals (50 rows, HTML)', url: '/dashboard/approvals', headers: cookie, check: (body: string) => (body.match(/data-approval=/g) ?? []).length === 50 },
    { name: 'GET /v1/approvals?status=pending&limit=50', url: '/v1/approvals?status=pending&limit=50', headers: key, check: (body: string) => (JSON.parse(body) as { data: unknown[] }).data.length === 50 },
  ];
  const once = async (x: (typeof targets)[number]) => {
    const t0 = performance.now();
    const res = await app.inject({ method: 'GET', url: x.url, headers: x.headers });
    const ms = performance.now() - t0;
    if (res.statusCode !== 200 || !x.check(res.body)) throw new Error(`${x.name}: ${res.statusCode}, not 50 rows`);
    return ms;
  };
  process.stderr.write(`warming each target with ${warmup} requests, then ${rounds} alternating rounds of ${perRound} each...\n`);
  for (const x of targets) for (let i = 0; i < warmup; i++) await once(x);
  const samples: number[][] = targets.map(() => []);
  for (let r = 0; r < rounds; r++) for (const [j, x] of targets.entries()) for (let i = 0; i < perRound; i++) samples[j]!.push(await once(x));
  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;
  console.log(`\nbench/approvals-page: server time per request through app.inject, ${rounds} alternating rounds of ${perRound}\n`);
  targets.forEach((x, j) => console.log(`${x.name.padEnd(46)} p50 ${pct(samples[j]!, 50).toFixed(2).padStart(6)} ms   p99 ${pct(samples[j]!, 99).toFixed(2).padStart(6)} ms`));
  console.log(`\npage / API, p50 ${(pct(samples[0]!, 50) / pct(samples[1]!, 50)).toFixed(2)}x   p99 ${(pct(samples[0]!, 99) / pct(samples[1]!, 99)).toFixed(2)}x`);
  await app.close();
  await readSide.stop();
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
