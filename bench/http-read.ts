import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import Fastify from 'fastify';
import { buildApp } from '../src/app.ts';
import { Vault } from '../src/adapters/vault.ts';
import { generateSigningKey } from '../src/audit/note.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';
import { issueTokens } from '../test/helpers/oauth.ts';
import { benchPostgres, cpuMeter, cpuText } from './harness.ts';

// bench/http-read: GET /v1/projects/{id} (API-key auth, project resolution,
// read model query, zod on the way out) against a fastify hello-world route,
// both over real HTTP on loopback with 50 connections, in the same run; then
// the same GET with an OAuth access token (what MCP clients send), issued
// through the real authorization-code flow; and GET /healthz, the same route
// path with no credential and no read.
// autocannon runs in its own process. Goal (issue 39): ratio >= 0.7.
// Every target is warmed up first (a process's first seconds run slower:
// its code is still being compiled, its heap still grows), then loaded in
// alternating rounds; the figure is the median round's ratio.
// Beside each rate it prints the CPU this process (the servers) and PostgreSQL
// spent per request: the throughput of a shared machine swings with its
// neighbours, the cost per request much less.
// Run: npm run bench:http-read   (BENCH_SECONDS=5 per round, ROUNDS=3, WARMUP_SECONDS=3)

const seconds = Number(process.env.BENCH_SECONDS ?? '5');
const rounds = Number(process.env.ROUNDS ?? '3');
const warmup = Number(process.env.WARMUP_SECONDS ?? '3');
const autocannon = path.resolve('node_modules/autocannon/autocannon.js');

type Result = { rps: number; p99: number; non2xx: number; errors: number; cpuUs: number; pgUs: number };
/** autocannon in a child process (asynchronously: the servers under test share this event loop). */
async function load(url: string, headers: Record<string, string>, duration = seconds): Promise<Result> {
  const args = [autocannon, '-c', '50', '-d', String(duration), '-j'];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
  args.push(url);
  const cpu = cpuMeter();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  await new Promise((r) => child.on('exit', r));
  const j = JSON.parse(stdout) as { requests: { average: number; total: number }; latency: { p99: number }; non2xx: number; errors: number };
  const used = cpu.perRequest(j.requests.total);
  return { rps: j.requests.average, p99: j.latency.p99, non2xx: j.non2xx, errors: j.errors, cpuUs: used.ours, pgUs: used.postgres };
}

const pgServer = await benchPostgres();
try {
  const db = openDb(await pgServer.database('bench_http'), { max: 10 });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit' });
  const secret = 'svc_bench_secret_0123456789abcdefghijklmnop';
  const vault = await Vault.open(db, randomBytes(32));
  const app = await buildApp({ vault, db, store, readSide, serviceSecret: secret, baseUrl: 'http://127.0.0.1', logLevel: 'warn', rateLimit: { burst: 1e9, perSecond: 1e9 } });
  const platform = { authorization: `Bearer ${secret}` };
  const org = (await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: 'Bench', owner_email: 'bench@example.com' } })).json();
  const key = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...platform, 'x-svc-user': org.owner.user_id }, payload: { name: 'bench', environment: 'test' } })).json().key;
  const ours = await app.listen({ host: '127.0.0.1', port: 0 });

  const hello = Fastify({ logger: false });
  hello.get('/hello', async () => ({ hello: 'world' }));
  const helloUrl = await hello.listen({ host: '127.0.0.1', port: 0 });

  const accessToken = (await issueTokens(app, key, 'http://127.0.0.1')).access_token;
  const project = `${ours}/v1/projects/${org.default_project.id}`;
  // GET /healthz goes through the same route path (hooks, validation, response check, encoding) with no credential and no read:
  // the difference between it and the hello-world is the route path, between it and the project GET the credential, tenancy and read.
  const targets: { name: string; url: string; headers: Record<string, string> }[] = [
    { name: 'GET /v1/projects/{id}, API key', url: project, headers: { authorization: `Bearer ${key}` } },
    { name: 'the same, OAuth access token', url: project, headers: { authorization: `Bearer ${accessToken}` } },
    { name: 'GET /healthz (no credential)', url: `${ours}/healthz`, headers: {} },
  ];
  process.stderr.write(`warming each target for ${warmup} s, then ${rounds} alternating rounds of ${seconds} s each with 50 connections...\n`);
  await load(`${helloUrl}/hello`, {}, warmup);
  for (const x of targets) await load(x.url, x.headers, warmup);
  const results: { base: Result; reads: Result[] }[] = [];
  for (let r = 0; r < rounds; r++) {
    const base = await load(`${helloUrl}/hello`, {});
    const reads: Result[] = [];
    for (const x of targets) reads.push(await load(x.url, x.headers));
    results.push({ base, reads });
  }

  console.log(`\nbench/http-read: 50 connections, ${rounds} alternating rounds of ${seconds} s each after ${warmup} s of warm-up, loopback HTTP\n`);
  results.forEach(({ base, reads }, i) => {
    const cost = (x: Result) => cpuText(x.cpuUs, x.pgUs);
    console.log(`round ${i + 1}: ${'fastify hello-world'.padEnd(34)} ${base.rps.toFixed(0).padStart(7)} req/s (p99 ${base.p99} ms)          ${cost(base)}`);
    reads.forEach((x, j) => console.log(`         ${targets[j]!.name.padEnd(34)} ${x.rps.toFixed(0).padStart(7)} req/s (p99 ${x.p99} ms)   ${(x.rps / base.rps).toFixed(2)}x  ${cost(x)}`));
  });
  const median = (j: number) => results.map((r) => r.reads[j]!.rps / r.base.rps).sort((a, b) => a - b)[Math.floor(results.length / 2)]!;
  console.log(`\nratio, median round, API key         ${median(0).toFixed(2)}x  (goal >= 0.7: ${median(0) >= 0.7 ? 'met' : 'NOT met'})`);
  console.log(`ratio, median round, access token    ${median(1).toFixed(2)}x`);
  console.log(`ratio, median round, /healthz        ${median(2).toFixed(2)}x  (the route path alone)`);
  const bad = results.reduce((n, r) => n + r.reads.reduce((m, x) => m + x.non2xx + x.errors, 0), 0);
  if (bad > 0) console.log(`WARNING: ${bad} non-2xx responses or errors`);
  await hello.close();
  await app.close();
  await readSide.stop();
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
