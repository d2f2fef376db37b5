import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/postgres/embedded.ts';

// `npm test`: one embedded PostgreSQL for the whole run, then tap. Each test
// file creates its own database on it (test/helpers/db.ts).

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-test-'));
await fs.chmod(dir, 0o755);
const pg = await startEmbeddedPostgres({ dataDir: dir, durable: false });
let code = 1;
try {
  code = await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, [path.resolve('node_modules/tap/dist/esm/run.mjs'), ...process.argv.slice(2)], {
      stdio: 'inherit',
      env: { ...process.env, TEST_PG_ADMIN_URL: pg.adminUrl },
    });
    child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0)));
  });
} finally {
  await pg.stop();
  await fs.rm(dir, { recursive: true, force: true });
}
process.exit(code);
