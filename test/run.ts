import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { startEmbeddedPostgres } from '../src/postgres/embedded.ts';
import { runTap } from '../scripts/tap.ts';
import { makeSchemaTemplate, TEMPLATE_ENV } from './helpers/db.ts';
import { testApp } from './helpers/app.ts';

// `npm test`: one embedded PostgreSQL for the whole run, the service's schema
// migrated once into a template database on it, then tap (scripts/tap.ts:
// arguments go to tap, `npm test -- test/http/x.test.ts`; the slowest files
// are printed at the end). Each test file creates its own databases on the
// server (test/helpers/db.ts), a ledger's copied from the template. A file
// run alone (`npx tap test/x.test.ts`) starts a server of its own.
// docs/performance.md, "The suite", says where the time goes.

const TEMPLATE = 'ledger_schema_template';

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-test-'));
await fs.chmod(dir, 0o755);
// Several files at once, each with its pools (and some with several service instances), on one server.
const pg = await startEmbeddedPostgres({ dataDir: dir, durable: false, maxConnections: 500 });
let code = 1;
try {
  process.env.TEST_PG_ADMIN_URL = pg.adminUrl;
  await makeSchemaTemplate(pg.adminUrl, TEMPLATE, (t) => testApp(t as Test));
  code = await runTap(process.argv.slice(2), { ...process.env, [TEMPLATE_ENV]: TEMPLATE });
} finally {
  await pg.stop();
  await fs.rm(dir, { recursive: true, force: true });
}
process.exit(code);
