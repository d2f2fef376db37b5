import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchPostgres } from './harness.ts';
import { openWorld, type Headers, type PageCase } from './dashboard-world.ts';

// bench/dashboard: the server time of each dashboard page that lists rows,
// beside the API's list answering the same rows, at 100 000 rows in the table
// the page lists. Every case is a file of bench/dashboard-pages/ (a PageCase:
// it seeds its table through the API for an organization of its own, then
// names the page and the API list). A case makes its first rows through the
// API, so their shape is real, and copies them in SQL up to the count
// (World.multiply): 100 000 commands would take longer than a bench may (held
// spends went at 20 a second on this shared machine). Each pair is timed through app.inject
// (the server's own time: routing, the session or the credential, the use
// case's reads, rendering or serialization; no socket), one request at a
// time, in alternating rounds of the same run; prints p50 and p99 of each and
// the page's cost as a ratio of the API's.
// Run: npm run bench:dashboard   (ROWS=100000, CASES=approvals,keys, ROUNDS=3, PER_ROUND=100, WARMUP=50)

const ROWS = Number(process.env.ROWS ?? '100000');
const rounds = Number(process.env.ROUNDS ?? '3');
const perRound = Number(process.env.PER_ROUND ?? '100');
const warmup = Number(process.env.WARMUP ?? '50');
const only = process.env.CASES?.split(',').map((s) => s.trim()).filter(Boolean);

const folder = path.join(path.dirname(fileURLToPath(import.meta.url)), 'dashboard-pages');
const cases: { file: string; c: PageCase }[] = [];
for (const file of (await readdir(folder)).filter((f) => f.endsWith('.ts')).sort()) {
  if (only && !only.includes(file.replace(/\.ts$/, ''))) continue;
  cases.push({ file, c: (await import(pathToFileURL(path.join(folder, file)).href)).default as PageCase });
}
if (cases.length === 0) throw new Error(`no case matches CASES=${process.env.CASES}; the cases are the files of ${folder}`);

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;
const pgServer = await benchPostgres();
const lines: string[] = [];
try {
  const world = await openWorld(await pgServer.database('bench_dashboard'));
  for (const { file, c } of cases) {
    const rows = c.rows ?? ROWS;
    process.stderr.write(`${c.name} (${file}): seeding ${rows} rows of ${c.table}...\n`);
    const org = await world.organization(c.name);
    const t0 = Date.now();
    const { page, api, apiHeaders } = await c.seed(world, org, rows);
    const { rows: counted } = await world.db.query<{ n: string }>(`SELECT count(*) AS n FROM ${c.table} WHERE org_id = $1`, [org.orgId]);
    process.stderr.write(`  seeded in ${((Date.now() - t0) / 1000).toFixed(0)} s: ${counted[0]!.n} rows of ${c.table} for the organization\n`);
    const get = async (url: string, headers: Headers, count: (body: string) => number) => {
      const t = performance.now();
      const res = await world.app.inject({ method: 'GET', url, headers });
      const ms = performance.now() - t;
      if (res.statusCode !== 200) throw new Error(`GET ${url} answered ${res.statusCode}: ${res.body.slice(0, 300)}`);
      return { ms, listed: count(res.body), bytes: res.body.length };
    };
    const targets = [
      { url: page, run: () => get(page, org.cookie, c.pageRows) },
      { url: api, run: () => get(api, apiHeaders, (b) => c.apiRows(JSON.parse(b))) },
    ];
    const first = await Promise.all(targets.map((t) => t.run()));
    if (first.some((f) => f.listed === 0)) throw new Error(`${c.name}: the page listed ${first[0]!.listed} rows, the API ${first[1]!.listed}; both must list rows`);
    process.stderr.write(`  the page lists ${first[0]!.listed} rows (${first[0]!.bytes} bytes), the API ${first[1]!.listed} (${first[1]!.bytes} bytes)\n`);
    for (const t of targets) for (let i = 0; i < warmup; i++) await t.run();
    const samples = targets.map(() => [] as number[]);
    for (let r = 0; r < rounds; r++) for (const [j, t] of targets.entries()) for (let i = 0; i < perRound; i++) samples[j]!.push((await t.run()).ms);
    const [p, a] = samples as [number[], number[]];
    const ms = (x: number) => x.toFixed(2).padStart(7);
    lines.push(
      `${c.name.padEnd(24)} ${String(counted[0]!.n).padStart(7)}  ${`GET ${page}`.padEnd(44)} p50 ${ms(pct(p, 50))} ms  p99 ${ms(pct(p, 99))} ms  (${first[0]!.listed} listed)`,
      `${''.padEnd(24)} ${''.padStart(7)}  ${`GET ${api}`.padEnd(44)} p50 ${ms(pct(a, 50))} ms  p99 ${ms(pct(a, 99))} ms  (${first[1]!.listed} listed)`,
      `${''.padEnd(33)}page / API: p50 ${(pct(p, 50) / pct(a, 50)).toFixed(2)}x, p99 ${(pct(p, 99) / pct(a, 99)).toFixed(2)}x`,
    );
  }
  await world.close();
} finally {
  await pgServer.stop();
}
console.log(`\nbench/dashboard: server time per request through app.inject, one at a time, ${rounds} alternating rounds of ${perRound} after ${warmup} warm-up requests each\n`);
console.log(`${'page'.padEnd(24)} ${'rows'.padStart(7)}  request`);
for (const l of lines) console.log(l);
