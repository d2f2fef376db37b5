import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.ts';
import type { MailMessage, Mailer } from '../src/adapters/mail/port.ts';
import { Vault } from '../src/adapters/vault.ts';
import { generateSigningKey } from '../src/audit/note.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';
import { benchPostgres, closedLoop, type LoadResult } from './harness.ts';

// bench/dashboard: the server time of a dashboard page listing 50 rows (the
// API keys page of an organization with 50 test keys, as its owner signed in
// with a session cookie) against GET /v1/api-keys for the same 50 keys through
// the service-auth credential (platform secret + x-svc-user, the same person),
// both through app.inject (server time: routing, session or credential,
// the use case's read, rendering or serialization; no socket), one request at
// a time, in alternating rounds of the same run. Prints p50 and p99 of each
// and the page's cost as a ratio of the API's (page / API), and beside them
// the account page (no rows: the session and the shell alone). (The team page has
// no GET twin: the spec's /v1/team/members is POST only.)
// Run: npm run bench:dashboard   (BENCH_SECONDS=3 per round, ROUNDS=3)

const seconds = Number(process.env.BENCH_SECONDS ?? '3');
const rounds = Number(process.env.ROUNDS ?? '3');
const ROWS = 50;
const BASE = 'http://127.0.0.1:8080';
const SHELL = '/dashboard/account';

/** Keeps the sign-in codes the service mails, for the bench to type. */
class CapturingMailer implements Mailer {
  readonly sent: MailMessage[] = [];
  async send(m: MailMessage): Promise<void> {
    this.sent.push(m);
  }
}

function ok<T extends { statusCode: number; body: string }>(r: T, status: number, what: string): T {
  if (r.statusCode !== status) throw new Error(`${what}: expected ${status}, got ${r.statusCode}: ${r.body.slice(0, 300)}`);
  return r;
}

/** Signs a person in through the dashboard's own pages (e-mail, then the mailed code); the session cookie. */
async function signIn(app: FastifyInstance, mailer: CapturingMailer, email: string): Promise<string> {
  const form = { 'content-type': 'application/x-www-form-urlencoded', origin: BASE };
  const asked = ok(await app.inject({ method: 'POST', url: '/dashboard/sign-in', headers: form, payload: new URLSearchParams({ email }).toString() }), 303, 'sign-in');
  const challenge = new URL(asked.headers.location as string, BASE).searchParams.get('c')!;
  const code = mailer.sent.at(-1)?.code;
  if (!code) throw new Error('no sign-in code was mailed');
  const signed = ok(await app.inject({ method: 'POST', url: '/dashboard/sign-in/code', headers: form, payload: new URLSearchParams({ c: challenge, code }).toString() }), 303, 'sign-in code');
  const cookie = signed.cookies.find((c) => c.name === 'dash_session');
  if (!cookie) throw new Error('no session cookie after sign-in');
  return `dash_session=${cookie.value}`;
}

type Pair = { name: string; page: string; api: string; rows: (body: string) => number; apiRows: (json: unknown) => number };

const pgServer = await benchPostgres();
try {
  const db = openDb(await pgServer.database('bench_dashboard'), { max: 10 });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit' });
  const secret = 'svc_bench_secret_0123456789abcdefghijklmnop';
  const vault = await Vault.open(db, randomBytes(32));
  const mailer = new CapturingMailer();
  const app = await buildApp({ vault, db, store, readSide, serviceSecret: secret, baseUrl: BASE, logLevel: 'warn', rateLimit: { burst: 1e9, perSecond: 1e9 }, mailer });
  const platform = { authorization: `Bearer ${secret}` };
  const email = 'owner@bench.example';
  const org = ok(await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: 'Bench', owner_email: email } }), 201, 'bootstrap').json();
  const svc = { ...platform, 'x-svc-user': org.owner.user_id as string };
  process.stderr.write(`making ${ROWS} API keys...\n`);
  for (let i = 0; i < ROWS; i++) ok(await app.inject({ method: 'POST', url: '/v1/api-keys', headers: svc, payload: { name: `key ${i}`, environment: 'test' } }), 201, 'key');
  const cookie = await signIn(app, mailer, email);

  const pairs: Pair[] = [
    { name: 'API keys', page: '/dashboard/keys', api: '/v1/api-keys', rows: (b) => (b.match(/\/revoke"/g) ?? []).length, apiRows: (j) => (j as { api_keys: unknown[] }).api_keys.length },
  ];
  const getPage = (url: string) => app.inject({ method: 'GET', url, headers: { cookie } });
  const getApi = (url: string) => app.inject({ method: 'GET', url, headers: svc });

  const usable: Pair[] = [];
  for (const p of pairs) {
    const page = await getPage(p.page);
    const api = await getApi(p.api);
    if (page.statusCode !== 200 || api.statusCode !== 200) {
      console.log(`skipped ${p.name}: the page answered ${page.statusCode}, the API ${api.statusCode}`);
      continue;
    }
    process.stderr.write(`${p.name}: the page lists ${p.rows(page.body)} rows (${page.body.length} bytes), the API ${p.apiRows(api.json())} (${api.body.length} bytes)\n`);
    usable.push(p);
  }
  const one = (f: () => Promise<{ statusCode: number }>) => async () => {
    const r = await f();
    if (r.statusCode !== 200) throw new Error(`answered ${r.statusCode}`);
    return 1;
  };
  // Warm-up: a process's first requests run slower (code still compiling).
  for (const p of usable) {
    await closedLoop('warm', 1, 1, one(() => getPage(p.page)));
    await closedLoop('warm', 1, 1, one(() => getApi(p.api)));
  }
  // The account page lists no rows: the session, the shell and its switchers alone, to tell them from the 50 rows.
  const shell = (await getPage(SHELL)).statusCode === 200;
  if (shell) await closedLoop('warm', 1, 1, one(() => getPage(SHELL)));
  const results = new Map<string, { page: LoadResult[]; api: LoadResult[]; shell: LoadResult[] }>(usable.map((p) => [p.name, { page: [], api: [], shell: [] }]));
  for (let r = 0; r < rounds; r++) {
    for (const p of usable) {
      results.get(p.name)!.page.push(await closedLoop(p.page, 1, seconds, one(() => getPage(p.page))));
      results.get(p.name)!.api.push(await closedLoop(p.api, 1, seconds, one(() => getApi(p.api))));
      if (shell) results.get(p.name)!.shell.push(await closedLoop(SHELL, 1, seconds, one(() => getPage(SHELL))));
    }
  }

  console.log(`\nbench/dashboard: server time per request (app.inject, one at a time), ${ROWS} rows, ${rounds} alternating rounds of ${seconds} s\n`);
  const ms = (x: number) => x.toFixed(2).padStart(7);
  for (const p of usable) {
    const { page, api, shell: bare } = results.get(p.name)!;
    page.forEach((pg, i) => {
      const a = api[i]!;
      console.log(`round ${i + 1}  ${`GET ${p.page}`.padEnd(36)} p50 ${ms(pg.p50Ms)} ms  p99 ${ms(pg.p99Ms)} ms`);
      console.log(`         ${`GET ${p.api} (service auth)`.padEnd(36)} p50 ${ms(a.p50Ms)} ms  p99 ${ms(a.p99Ms)} ms   page/API ${(pg.p50Ms / a.p50Ms).toFixed(2)}x`);
      const b = bare[i];
      if (b) console.log(`         ${`GET ${SHELL} (no rows)`.padEnd(36)} p50 ${ms(b.p50Ms)} ms  p99 ${ms(b.p99Ms)} ms   shell/API ${(b.p50Ms / a.p50Ms).toFixed(2)}x`);
    });
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const ratio = median(page.map((pg, i) => pg.p50Ms / api[i]!.p50Ms));
    const p99 = median(page.map((pg, i) => pg.p99Ms / api[i]!.p99Ms));
    console.log(`${p.name} page against the API, median round: p50 ${ratio.toFixed(2)}x, p99 ${p99.toFixed(2)}x\n`);
  }
  await app.close();
  await readSide.stop();
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
