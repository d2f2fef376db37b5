import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { checkDataFolder, StartupError } from '../../src/startup.ts';

// `npm start` where it cannot work: one clear line naming the folder or port
// and the fix, a non-zero exit, no stack trace, and nothing started.

const root = path.resolve(import.meta.dirname, '..', '..');

/** Runs the server entry point as `npm start` does; resolves when it exits (bounded). */
function start(env: Record<string, string>): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: root, env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the service did not exit within 120 s; stderr: ${stderr}`));
    }, 120_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, stdout });
    });
  });
}

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-startup-'));
t.teardown(() => fs.rm(dir, { recursive: true, force: true }));

const oneClearLine = (t: Test, r: { code: number | null; stderr: string; stdout: string }, pattern: RegExp) => {
  t.not(r.code, 0, 'non-zero exit');
  const lines = r.stderr.split('\n').filter((l) => l.trim() && !l.startsWith('npm warn'));
  t.equal(lines.length, 1, `one line on stderr: ${r.stderr}`);
  t.match(lines[0], pattern);
  t.notMatch(r.stderr + r.stdout, /\n\s+at /, 'no stack trace');
  t.equal(r.stdout, '', 'nothing else printed');
};

t.test('a data folder that cannot be created', async (t) => {
  const file = path.join(dir, 'a-file');
  await fs.writeFile(file, 'in the way');
  const dataDir = path.join(file, 'data');
  const r = await start({ DATA_DIR: dataDir, PORT: '0' });
  oneClearLine(t, r, new RegExp(`^agent-ledger: the data folder ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} cannot be created: .*set DATA_DIR to another folder$`));
});

t.test('a port already in use', async (t) => {
  const holder = net.createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => holder.close(() => r())));
  const port = (holder.address() as net.AddressInfo).port;
  const dataDir = path.join(dir, 'port-data');
  const r = await start({ DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1' });
  oneClearLine(t, r, new RegExp(`^agent-ledger: port ${port} on 127\\.0\\.0\\.1 is already in use: .*set PORT to a free port$`));
  t.same(await fs.readdir(dataDir).catch(() => []), [], 'Postgres was not started: nothing in the data folder');
});

t.test('a full disk is named before anything starts', async (t) => {
  const err = await checkDataFolder(path.join(dir, 'full'), Number.MAX_SAFE_INTEGER).catch((e: unknown) => e);
  t.ok(err instanceof StartupError);
  t.match((err as Error).message, /^the data folder .*\/full is on a full disk \(\d+ MB free, \d+ MB needed\): free some space or set DATA_DIR to a folder on another disk$/);
});

/** Starts the server (under a pseudo-terminal when `tty`), reads its output until the ready line, then stops it. */
function serveUntilReady(env: Record<string, string>, tty: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const fast = { SANDBOX_CHAIN: 'off', SANDBOX_BANK: 'off', SANDBOX_PROVIDERS: 'off', SANDBOX_MERCHANTS: 'off', SANDBOX_PSP: 'off', BROWSER_WORKER: 'none', HOST: '127.0.0.1', PORT: '0' };
    const command = `${process.execPath} --import tsx src/main.ts`;
    const child = tty
      ? spawn('script', ['-qfec', command, '/dev/null'], { cwd: root, env: { ...process.env, LOG_LEVEL: 'info', ...fast, ...env }, stdio: ['pipe', 'pipe', 'pipe'], detached: true })
      : spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: root, env: { ...process.env, LOG_LEVEL: 'info', ...fast, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    const stop = () => {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {}
    };
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`no ready line within 120 s: ${out}`));
    }, 120_000);
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (/ready at http:\/\/127\.0\.0\.1:\d+[^\n]*bootstrap[^\n]*\n/.test(out)) stop();
    });
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', () => {
      clearTimeout(timer);
      resolve(out);
    });
  });
}

t.test('npm start prints one ready line naming the URL, /docs and the bootstrap command; JSON when not at a terminal, readable lines at one', async (t) => {
  const dataDir = path.join(dir, 'ready-data');
  const json = await serveUntilReady({ DATA_DIR: dataDir }, false);
  const lines = json.split('\n').filter((l) => l.trim());
  const ready = lines.filter((l) => l.includes('ready at'));
  t.equal(ready.length, 1, 'one ready line');
  const msg = (JSON.parse(ready[0]!) as { msg: string }).msg;
  t.match(msg, /^ready at (http:\/\/127\.0\.0\.1:\d+) — API reference: \1\/docs — create an organization, its owner and API keys: npm run cli -- bootstrap --org-name "Acme" --email owner@acme\.example$/);
  t.ok(lines.filter((l) => l.startsWith('{')).every((l) => JSON.parse(l)), 'stdout is JSON lines');

  const pretty = await serveUntilReady({ DATA_DIR: dataDir }, true);
  const plain = pretty.replace(/\x1b\[[0-9;]*m/g, '');
  t.match(plain, /^\[\d\d:\d\d:\d\d\] INFO: ready at http:\/\/127\.0\.0\.1:\d+ — API reference: http:\/\/127\.0\.0\.1:\d+\/docs — create an organization/m, 'a readable line: time, level, message');
  t.notMatch(plain, /^\{"level"/m, 'no JSON lines at a terminal');
});
