import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { startEmbeddedPostgres } from '../src/postgres/embedded.ts';
import { findHeadlessShell } from '../src/adapters/browser/chromium.ts';
import { prebuildTap, runTap } from '../scripts/tap.ts';
import { makeSchemaTemplate, TEMPLATE_ENV } from './helpers/db.ts';
import { testApp } from './helpers/app.ts';
import { OPENAPI_DOC_ENV } from './helpers/contract.ts';

// `npm test`: the suite compiled (tsc emits .build/, scripts/build-tree.mjs),
// then this file's compiled copy: one embedded PostgreSQL for the whole run, the service's schema
// migrated once into a template database on it, then tap (scripts/tap.ts:
// arguments go to tap, `npm test -- test/http/x.test.ts`; the slowest files
// are printed at the end). Each test file creates its own databases on the
// server (test/helpers/db.ts), a ledger's copied from the template. A file
// run alone (`npx tap test/x.test.ts`) starts a server of its own.
// docs/performance.md, "The suite", says where the time goes.

const TEMPLATE = 'ledger_schema_template';

/** The validator's findings of the run, by operation and status, most frequent first. */
function printContractSurvey(lines: string): void {
  const counts = new Map<string, number>();
  for (const line of lines.split('\n').filter(Boolean)) {
    const v = JSON.parse(line) as { operation: string; status: number; problem: string };
    const key = `${v.operation} ${v.status}: ${v.problem.slice(0, 160)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return void console.log('\n# The OpenAPI document describes every answer the suite received.');
  console.log(`\n# ${total} answers the OpenAPI document does not describe (a run without CONTRACT_STRICT=0 fails on them), by operation:`);
  for (const [k, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`#   ${String(n).padStart(4)}  ${k}`);
  if (counts.size > 40) console.log(`#   … and ${counts.size - 40} more kinds`);
}

// tap's Test class, rebuilt for this project's plugins after an install, while the server starts.
const tapBuilt = prebuildTap();
tapBuilt.catch(() => {});
// The headless shell the browser tests drive, unpacked once (@sparticuz/chromium, to /tmp) before files race to unpack it.
const shellReady = findHeadlessShell();
const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-test-'));
await fs.chmod(dir, 0o755);
// Several files at once, each with its pools (and some with several service instances), on one server.
const pg = await startEmbeddedPostgres({ dataDir: dir, durable: false, maxConnections: 500 });
let code = 1;
try {
  process.env.TEST_PG_ADMIN_URL = pg.adminUrl;
  // The served OpenAPI document, kept for the files' response validator (test/helpers/contract.ts).
  const openapi = path.join(dir, 'openapi.json');
  await makeSchemaTemplate(pg.adminUrl, TEMPLATE, async (t) => {
    const { app } = await testApp(t as Test);
    await fs.writeFile(openapi, (await app.inject({ method: 'GET', url: '/openapi.json' })).body);
  });
  await tapBuilt;
  await shellReady;
  // The response validator (test/helpers/contract.ts) is strict: an answer the served document
  // does not describe fails the test that received it. CONTRACT_STRICT=0 turns the run into a
  // survey instead (the answers collected and summed up at the end, the run not failed on them),
  // for finding them all at once after a change (docs/decisions.md, "Issue 60: the reference").
  const strict = process.env.CONTRACT_STRICT !== '0';
  const survey = path.join(dir, 'contract-violations.jsonl');
  // Compiled (`npm test` runs .build/test/run.js: scripts/build-tree.mjs), a file named as written, test/x.test.ts, runs as its .js.
  const args = process.argv.slice(2).map((a) => (import.meta.url.endsWith('.js') ? a.replace(/^(test\/.*)\.tsx?$/, '$1.js') : a));
  code = await runTap(args, { ...process.env, [TEMPLATE_ENV]: TEMPLATE, [OPENAPI_DOC_ENV]: openapi, ...(strict || process.env.CONTRACT_LOG ? {} : { CONTRACT_LOG: survey }) });
  if (!strict) printContractSurvey(await fs.readFile(survey, 'utf8').catch(() => ''));
} finally {
  await pg.stop();
  await fs.rm(dir, { recursive: true, force: true });
}
process.exit(code);
