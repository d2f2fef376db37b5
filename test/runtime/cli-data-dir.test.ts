import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { freeLoopbackPort } from '../../src/postgres/embedded.ts';
import { root } from '../helpers/service.ts';
import { until } from '../helpers/wait.ts';
import { nodeArgs } from '../helpers/entry.ts';

// The CLI against the database a user means: a command that only reads,
// pointed at a DATA_DIR without a database, says so in one line and creates
// nothing; a DATA_DIR that cannot work is named in one line (no hang);
// `reset` removes a data folder with its cluster, relocated or not, and
// refuses while the service runs on it; and SIGTERM to `npm start` stops the
// server itself (no process left listening behind the wrapper).

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-cli-'));
t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
const systemDir = path.join(dir, 'system');

type Run = { code: number | null; stdout: string; stderr: string };
function cli(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...nodeArgs('src/cli.ts'), ...args], { cwd: root, env: { ...process.env, EMBEDDED_PG_SYSTEM_DIR: systemDir, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const oneLine = (t: Test, r: Run, pattern: RegExp) => {
  t.not(r.code, 0, 'non-zero exit');
  const lines = r.stderr.split('\n').filter((l) => l.trim());
  t.equal(lines.length, 1, `one line: ${r.stderr}`);
  t.match(lines[0], pattern);
  t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
};

t.test('commands that only read refuse a DATA_DIR without a database, naming it, and create nothing', async (t) => {
  const missing = path.join(dir, 'never-ran');
  const empty = path.join(dir, 'empty');
  await fs.mkdir(empty);
  for (const args of [['projections', 'status'], ['log', 'read'], ['audit', 'verify', '--org', 'org_x']]) {
    const r = await cli(args, { DATA_DIR: missing });
    oneLine(t, r, new RegExp(`^${args.slice(0, 2).join(' ')} only reads, and DATA_DIR=${missing} does not exist \\(nothing was created\\): run it with the DATA_DIR the service runs with`));
    t.notOk(existsSync(missing), 'the folder was not created');
  }
  const r = await cli(['projections', 'status'], { DATA_DIR: empty });
  oneLine(t, r, new RegExp(`DATA_DIR=${empty} holds no database`));
  t.same(await fs.readdir(empty), [], 'nothing was written into it');
});

t.test('a DATA_DIR that cannot work is named in one line, for bootstrap too', async (t) => {
  oneLine(t, await cli(['bootstrap', '--org-name', 'A', '--email', 'a@example.com'], { DATA_DIR: '/proc/nope' }), /^error: the data folder \/proc\/nope cannot be created there .*set DATA_DIR/);
  const file = path.join(dir, 'a-file');
  await fs.writeFile(file, 'x');
  oneLine(t, await cli(['bootstrap', '--org-name', 'A', '--email', 'a@example.com'], { DATA_DIR: path.join(file, 'data') }), /^error: the data folder .* cannot be created: a file is in the way/);
});

t.test('reset removes a data folder and its cluster, relocated or in place, and clusters whose folder is gone', async (t) => {
  // A folder whose cluster was relocated (as root), one with its cluster in place, and a cluster whose folder was deleted by hand.
  const relocated = path.join(dir, 'relocated');
  const cluster = path.join(systemDir, 'clusters', 'relocated-0123');
  await fs.mkdir(cluster, { recursive: true });
  await fs.writeFile(path.join(cluster, 'PG_VERSION'), '17\n');
  await fs.writeFile(`${cluster}.data-dir`, `${relocated}\n`);
  await fs.mkdir(path.join(relocated, 'sandboxes'), { recursive: true });
  await fs.writeFile(path.join(relocated, 'pg-cluster'), `${cluster}\n`);
  const orphan = path.join(systemDir, 'clusters', 'deleted-4567');
  await fs.mkdir(orphan, { recursive: true });
  await fs.writeFile(`${orphan}.data-dir`, `${path.join(dir, 'deleted-by-hand')}\n`);

  const refused = await cli(['reset'], { DATA_DIR: relocated });
  oneLine(t, refused, /add --yes to confirm/);
  t.ok(existsSync(relocated) && existsSync(cluster), 'without a confirmation nothing is removed');

  const r = await cli(['reset', '--yes'], { DATA_DIR: relocated });
  t.equal(r.code, 0, r.stderr);
  t.same(JSON.parse(r.stdout).removed, [relocated, cluster, orphan]);
  t.notOk(existsSync(relocated), 'the data folder is gone');
  t.notOk(existsSync(cluster), 'its relocated cluster is gone');
  t.notOk(existsSync(orphan), 'the cluster whose folder was deleted by hand is gone');

  const inPlace = path.join(dir, 'in-place');
  await fs.mkdir(path.join(inPlace, 'pg'), { recursive: true });
  await fs.writeFile(path.join(inPlace, 'pg', 'PG_VERSION'), '17\n');
  // While a service runs on the folder (its owner pid alive), reset refuses.
  await fs.writeFile(path.join(inPlace, 'pg-owner.pid'), `${process.pid}\n`);
  oneLine(t, await cli(['reset', '--yes'], { DATA_DIR: inPlace }), new RegExp(`^error: the service \\(pid ${process.pid}\\) is running on DATA_DIR=${inPlace}: stop it first`));
  t.ok(existsSync(inPlace));
  await fs.rm(path.join(inPlace, 'pg-owner.pid'));
  t.equal((await cli(['reset', '--yes'], { DATA_DIR: inPlace })).code, 0);
  t.notOk(existsSync(inPlace));
});

t.test('--help prints the usage and exits 0', async (t) => {
  const r = await cli(['--help'], { DATA_DIR: path.join(dir, 'unused') });
  t.equal(r.code, 0);
  t.match(r.stdout, /^usage: npm run cli -- <command>/);
  t.match(r.stdout, /reset \[--yes\]/);
});

t.test('SIGTERM to the npm start process stops the server behind it', async (t) => {
  const port = await freeLoopbackPort();
  const off = { SANDBOX_CHAIN: 'off', SANDBOX_BANK: 'off', SANDBOX_PROVIDERS: 'off', SANDBOX_MERCHANTS: 'off', SANDBOX_PSP: 'off', BROWSER_WORKER: 'none' };
  const npm = spawn('npm', ['start'], { cwd: root, env: { ...process.env, ...off, DATA_DIR: path.join(dir, 'npm-start'), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<number | null>((r) => npm.once('exit', (code) => r(code)));
  t.teardown(() => void npm.kill('SIGKILL'));
  const healthz = () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
  await until(async () => (npm.exitCode !== null ? Promise.reject(new Error('npm start exited')) : healthz()), 'the server answers', 180_000, 100);
  npm.kill('SIGTERM');
  await exited;
  // The server drained and exited too: nothing answers on its port any more.
  await until(async () => !(await healthz()), 'the server stops listening', 60_000, 100);
  t.pass('the server stopped with npm start');
});
