import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { freeLoopbackPort } from '../../src/postgres/embedded.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { root } from '../helpers/service.ts';
import { nodeArgs } from '../helpers/entry.ts';

// The operators' small things, through the CLI as a person runs it against a
// service's database (DATABASE_URL) and its URL: an unknown stream and a
// mistyped organization are said as such, and `projections status` piped is
// one JSON object a line.

const { app, ledger } = await testApp(t);
const port = await freeLoopbackPort();
await app.listen({ host: '127.0.0.1', port });
const org = await bootstrapOrg(app, 'Operators');
const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-cli-ops-'));
t.teardown(() => fs.rm(dir, { recursive: true, force: true }));

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...nodeArgs('src/cli.ts'), ...args], { cwd: root, env: { ...process.env, DATABASE_URL: ledger.url, DATA_DIR: dir, SVC_SERVICE_SECRET: 'svc_cli_test_secret_0123456789abcdefghij' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

t.test('log read on an unknown stream says so and exits 1; a known one prints its events', async (t) => {
  const r = await cli(['log', 'read', '--stream', 'org-nope']);
  t.equal(r.code, 1);
  t.equal(r.stdout, '');
  t.match(r.stderr, /^no stream org-nope in this log .*check --stream, DATA_DIR and DATABASE_URL\n$/);
  const known = await cli(['log', 'read', '--stream', `org-${org.orgId}`]);
  t.equal(known.code, 0, known.stderr);
  t.match(JSON.parse(known.stdout.split('\n')[0]!), { streamName: `org-${org.orgId}` });
});

t.test('audit monitor with a mistyped --org names the organization the key belongs to, and writes no evidence', async (t) => {
  const state = path.join(dir, 'monitor.json');
  const r = await cli(['audit', 'monitor', '--url', `http://127.0.0.1:${port}`, '--org', 'org_typo', '--state', state, '--api-key', org.testKey]);
  t.equal(r.code, 2);
  t.equal(r.stderr, `unknown organization org_typo for this API key (it belongs to ${org.orgId}): check --org\n`);
  t.notOk(existsSync(`${state}.evidence.json`), 'no evidence file');
  t.notOk(existsSync(state), 'no state file');
});

t.test('projections status piped: one JSON object a line, positions as stored', async (t) => {
  const r = await cli(['projections', 'status']);
  t.equal(r.code, 0, r.stderr);
  const rows = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { name: string; caught_up: boolean });
  t.ok(rows.length > 5, 'every projection and reactor');
  t.ok(rows.some((x) => x.name === 'x402'));
});
