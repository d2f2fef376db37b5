import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chromium } from 'playwright-core';
import { buildApp } from '../src/app.ts';
import { findChromium, launchChromium } from '../src/adapters/browser/chromium.ts';
import { embeddedWorker } from '../src/adapters/browser/worker.ts';
import { SandboxMerchants } from '../src/adapters/merchants/sandbox-merchants.ts';
import { Vault } from '../src/adapters/vault.ts';
import { generateSigningKey } from '../src/audit/note.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';
import { benchPostgres } from './harness.ts';

// bench/browser-forward: what reaching a browser context through another
// instance costs (docs/decisions.md, "Browser state across instances"). Two
// instances on one PostgreSQL over loopback HTTP; instance A holds a hosted
// session; the same requests go to A directly and to B, which finds A in
// browser_owners and forwards: a live-view input (POST, 204), a finish that
// A refuses (409 not_logged_in: API key, the session's stream, the claim),
// and the live view's first frame (SSE). Then the other option's facts: a
// context opened on a shared Chromium over the DevTools protocol against a
// Chromium launched per context (the embedded worker), and what a second
// DevTools client of that shared Chromium sees of the first one's contexts.
// Run: npx tsx bench/browser-forward.ts   (BENCH_N=200)

const N = Number(process.env.BENCH_N ?? '200');
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;
const line = (name: string, xs: number[]) => console.log(`${name.padEnd(44)} p50 ${pct(xs, 50).toFixed(2).padStart(7)} ms   p99 ${pct(xs, 99).toFixed(2).padStart(7)} ms   (n=${xs.length})`);
async function timed(n: number, f: () => Promise<void>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await f();
    out.push(performance.now() - t0);
  }
  return out;
}

const pg = await benchPostgres();
const merchants = new SandboxMerchants();
await merchants.start();
const secret = 'svc_bench_secret_0123456789abcdefghijklmnop';
const url = await pg.database('bench_browser_forward');
const closers: (() => Promise<unknown>)[] = [];
const bases: string[] = [];
try {
  for (let i = 0; i < 2; i++) {
    const db = openDb(url, { max: 10 });
    const store = await PostgresEventStore.open(db);
    const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit' }, undefined, { reactors: i === 0 });
    const app = await buildApp({ vault: await Vault.open(db, randomBytes(32)), db, store, readSide, serviceSecret: secret, baseUrl: 'http://127.0.0.1', logLevel: 'warn', rateLimit: { burst: 1e9, perSecond: 1e9 }, merchants: merchants.sites(), browserWorker: embeddedWorker() });
    bases.push(await app.listen({ host: '127.0.0.1', port: 0 }));
    closers.unshift(async () => (await app.close(), await readSide.stop(), await store.close(), await db.close()));
  }
  const [a, b] = bases as [string, string];
  const platform = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
  const post = async (base: string, path: string, headers: Record<string, string>, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  const org = (await (await post(a, '/v1/orgs', platform, { name: 'Bench', owner_email: 'bench@example.com' })).json()) as { owner: { user_id: string } };
  const key = ((await (await post(a, '/v1/api-keys', { ...platform, 'x-svc-user': org.owner.user_id }, { name: 'bench', environment: 'test' })).json()) as { key: string }).key;
  const api = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const started = (await (await post(a, '/v1/cart/merchant-b/connect/start', api, {})).json()) as { session_id: string; live_view_url: string };
  const path = new URL(started.live_view_url).pathname;
  const page = await fetch(`${a}${path}`, { headers: { accept: 'text/html' } });
  await page.text();
  const cookie = page.headers.getSetCookie()[0]!.split(';')[0]!;

  const input = (base: string) => async () => void (await (await post(base, `${path}/input`, { cookie, 'content-type': 'application/json' }, { type: 'key', key: 'Tab' })).arrayBuffer());
  const finish = (base: string) => async () => void (await (await post(base, '/v1/cart/merchant-b/connect/finish', api, { session_id: started.session_id })).arrayBuffer());
  const firstFrame = (base: string) => async () => {
    const ac = new AbortController();
    const res = await fetch(`${base}${path}/frames`, { headers: { cookie }, signal: ac.signal });
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('event: frame')) text += new TextDecoder().decode((await reader.read()).value);
    ac.abort();
  };
  for (const f of [input(a), input(b), finish(a), finish(b)]) await timed(20, f); // warm both paths
  console.log(`\nbench/browser-forward: two instances, one PostgreSQL, loopback HTTP; A holds the context\n`);
  line('live-view input, direct to A', await timed(N, input(a)));
  line('live-view input, through B (forwarded)', await timed(N, input(b)));
  line('finish refused (409), direct to A', await timed(N, finish(a)));
  line('finish refused (409), through B', await timed(N, finish(b)));
  line('live view: first frame, direct to A', await timed(Math.min(N, 40), firstFrame(a)));
  line('live view: first frame, through B', await timed(Math.min(N, 40), firstFrame(b)));
  await sharedChromium();
} finally {
  for (const c of closers) await c().catch(() => {});
  await merchants.stop();
  await pg.stop();
}

/** The other option: one Chromium every instance reaches over the DevTools protocol. */
async function sharedChromium(): Promise<void> {
  const found = (await findChromium())!;
  const proc = spawn(found.executablePath, [...new Set(found.args), '--remote-debugging-port=0', 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const ws = await new Promise<string>((resolve) => proc.stderr.on('data', (d: Buffer) => /DevTools listening on (\S+)/.exec(String(d)) && resolve(/DevTools listening on (\S+)/.exec(String(d))![1]!)));
  try {
    const first = await chromium.connectOverCDP(ws);
    const second = await chromium.connectOverCDP(ws);
    const shared = await timed(10, async () => void (await (await first.newContext()).newPage()));
    const seen = second.contexts().length;
    const launched = await timed(10, async () => {
      const b = await launchChromium();
      await (await b.newContext()).newPage();
      await b.close();
    });
    console.log('');
    line('context: shared Chromium over CDP', shared);
    line('context: a Chromium launched per context', launched);
    console.log(`a second DevTools client sees ${seen} context(s) of the shared Chromium (its default one), not the ${first.contexts().length - 1} the first client opened`);
    await first.close();
    await second.close();
  } finally {
    proc.kill();
  }
}
