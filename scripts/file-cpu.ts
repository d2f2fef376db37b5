import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { startEmbeddedPostgres } from '../src/postgres/embedded.ts';
import { makeSchemaTemplate, TEMPLATE_ENV } from '../test/helpers/db.ts';
import { testApp } from '../test/helpers/app.ts';

// The CPU time of test files, each run alone through tap as `npm test` runs it
// (one PostgreSQL and the schema template shared, as test/run.ts sets up), one
// file at a time: user + system seconds of tap's runner and the file's process
// tree (/usr/bin/time), and the wall time. On a shared machine the CPU columns
// are the ones to compare; the server's own CPU is not in them.
//   npx tsx scripts/file-cpu.ts test/http/x.test.ts test/dashboard/y.test.ts …
// ROUNDS=2 runs the list twice (alternating files, not the same file back to back).

const root = path.resolve(import.meta.dirname, '..');
const files = process.argv.slice(2);
const rounds = Number(process.env.ROUNDS ?? 1);
const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-cpu-'));
await fs.chmod(dir, 0o755);
const pg = await startEmbeddedPostgres({ dataDir: dir, durable: false, maxConnections: 200 });
const TEMPLATE = 'ledger_schema_template';
try {
  process.env.TEST_PG_ADMIN_URL = pg.adminUrl;
  await makeSchemaTemplate(pg.adminUrl, TEMPLATE, (t) => testApp(t as Test));
  const env = { ...process.env, [TEMPLATE_ENV]: TEMPLATE, CONTRACT_LOG: path.join(dir, 'contract.jsonl') };
  const total = { cpu: 0, wall: 0 };
  for (let r = 0; r < rounds; r++) {
    for (const file of files) {
      const out = await new Promise<{ code: number; err: string }>((resolve) => {
        const child = spawn('/usr/bin/time', ['-f', '%U %S %e', process.execPath, path.join(root, 'node_modules/tap/dist/esm/run.mjs'), '--reporter=silent', file], { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        child.stderr.on('data', (d) => (err += d));
        child.on('exit', (code) => resolve({ code: code ?? 1, err }));
      });
      const last = out.err.trim().split('\n').at(-1) ?? '';
      const [u, s, e] = last.split(' ').map(Number);
      total.cpu += u + s;
      total.wall += e;
      console.log(`${(u + s).toFixed(1).padStart(7)} s CPU ${e.toFixed(1).padStart(7)} s wall  ${out.code === 0 ? 'ok ' : 'FAIL'} ${file}`);
    }
  }
  console.log(`${total.cpu.toFixed(1).padStart(7)} s CPU ${total.wall.toFixed(1).padStart(7)} s wall  total (load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
} finally {
  await pg.stop();
  await fs.rm(dir, { recursive: true, force: true });
}
