import t from 'tap';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { openInstance } from '../../src/instance.ts';
import { testDatabase } from '../helpers/db.ts';

// Two instances started at the same moment on an empty database both come up:
// every schema change waits for the one schema lock (src/postgres/schema.ts)
// instead of racing the other instance on the same DDL. Each instance is
// composed as the server composes it (src/instance.ts), sandboxes off.

const TRIALS = Number(process.env.COLD_START_TRIALS ?? 20);
const WAVE = 4;
t.setTimeout(20 * 60_000);
const secret = `svc_${randomBytes(24).toString('hex')}`;
const seed = () => randomBytes(32).toString('base64');
const platform = { authorization: `Bearer ${secret}` };

t.test(`${TRIALS} cold starts of two instances together on an empty database`, async (t) => {
  let up = 0;
  const trial = async (trial: number) => {
    const scope: { teardown(fn: () => unknown): void; fns: (() => unknown)[] } = { fns: [], teardown(fn) { this.fns.push(fn); } };
    const { url, db } = await testDatabase(scope, { poolMax: 1 });
    await db.close();
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-cold-'));
    const config = loadConfig({
      DATABASE_URL: url,
      DATA_DIR: dataDir,
      SVC_SERVICE_SECRET: secret,
      AUDIT_SIGNING_KEY: seed(),
      VAULT_MASTER_KEY: seed(),
      RECEIPT_SIGNING_KEY: seed(),
      SANDBOX_BANK: 'off',
      SANDBOX_PROVIDERS: 'off',
      SANDBOX_MERCHANTS: 'off',
      SANDBOX_CHAIN: 'off',
      BROWSER_WORKER: 'none',
      LOG_LEVEL: 'silent',
    });
    const started = await Promise.allSettled([openInstance(config), openInstance(config)]);
    const failures = started.filter((s): s is PromiseRejectedResult => s.status === 'rejected').map((s) => String(s.reason));
    t.same(failures, [], `trial ${trial + 1}: both instances came up`);
    const [a, b] = started.map((s) => (s.status === 'fulfilled' ? s.value : undefined));
    if (a && b) {
      // Written through one, read through the other: one service.
      const org = await a.app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: `Cold ${trial}`, owner_email: `cold${trial}@example.com` } });
      const key = org.statusCode === 201 ? await b.app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...platform, 'x-svc-user': org.json().owner.user_id }, payload: { name: 'k', environment: 'test' } }) : undefined;
      const read = key?.statusCode === 201 ? await a.app.inject({ method: 'GET', url: '/v1/projects', headers: { authorization: `Bearer ${key.json().key}` } }) : undefined;
      if (read?.statusCode === 200 && read.body.includes(org.json().default_project.id)) up++;
      else t.fail(`trial ${trial + 1}: ${org.statusCode} / ${key?.statusCode} ${key?.body} / ${read?.statusCode} ${read?.body}`);
    }
    for (const s of started) if (s.status === 'fulfilled') await s.value.close();
    for (const fn of scope.fns.reverse()) await fn();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
  // Trials run WAVE at a time (each on its own database): the suite's time, not the race, is what a wave shares.
  for (let i = 0; i < TRIALS; i += WAVE) await Promise.all(Array.from({ length: Math.min(WAVE, TRIALS - i) }, (_, k) => trial(i + k)));
  t.equal(up, TRIALS, 'every trial served a write on one instance and the read on the other');
});
