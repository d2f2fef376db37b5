import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';

// How `npm test` (test/run.ts) and `npm run test:unit` run tap: its own
// runner (its terminal reporter on a terminal, plain TAP otherwise), without
// the "# No coverage generated" line (scripts/tap-quiet-coverage.mjs) nor the
// coverage loader in every test process (scripts/tap-no-coverage-loader.mjs), then
// the slowest files of the run, read from the per-file results tap keeps in
// .tap/test-results.

const root = path.resolve(import.meta.dirname, '..');
const RESULTS = path.join(root, '.tap', 'test-results');

/** Runs tap with `args` and `env`; resolves with its exit code after printing the slowest files. */
export async function runTap(args: string[], env: NodeJS.ProcessEnv = process.env, slowest = 10): Promise<number> {
  const started = Date.now();
  const nodeOptions = `--import=${path.join(root, 'scripts/tap-no-coverage-loader.mjs')} ${env.NODE_OPTIONS ?? ''}`.trim();
  const code = await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, ['--import', path.join(root, 'scripts/tap-quiet-coverage.mjs'), path.join(root, 'node_modules/tap/dist/esm/run.mjs'), ...args], { stdio: 'inherit', cwd: root, env: { ...env, NODE_OPTIONS: nodeOptions } });
    child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0)));
  });
  process.stdout.write(await slowestFiles(started, Date.now(), slowest));
  return code;
}

/**
 * Rebuilds tap's Test class for the plugins package.json's `tap.plugin` asks for, when the built one
 * (node_modules/@tapjs/test/test-built) has others: what tap's runner does before its first file, once
 * after an install. Started by test/run.ts beside the PostgreSQL it starts, instead of after it.
 * When this guess is wrong, tap's own check still rebuilds; only the overlap is lost.
 */
export async function prebuildTap(): Promise<void> {
  const built = await fs.readFile(path.join(root, 'node_modules/@tapjs/test/test-built/dist/esm/index.js'), 'utf8').catch(() => '');
  const signature = /export const signature = `([^`]*)`/.exec(built)?.[1]?.split('\n') ?? [];
  const pkg = JSON.parse(await fs.readFile(path.join(root, 'package.json'), 'utf8')) as { tap?: { plugin?: string[] } };
  const wanted = pkg.tap?.plugin ?? [];
  const stale = wanted.some((p) => (p.startsWith('!') ? signature.includes(p.slice(1)) : !signature.includes(p)));
  if (!stale) return;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'node_modules/tap/dist/esm/run.mjs'), 'build'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d));
    child.stderr.on('data', (d: Buffer) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tap build failed (${code}):\n${output}`))));
  });
}

export type FileTime = { file: string; ms: number; ok: boolean };

/** The per-file results tap wrote since `since` (ms epoch): each file's duration (its closing `# time=`) and outcome. */
export async function fileTimes(since: number, dir = RESULTS): Promise<FileTime[]> {
  const entries = await fs.readdir(dir, { recursive: true }).catch(() => [] as string[]);
  const out: FileTime[] = [];
  for (const rel of entries) {
    if (!rel.endsWith('.tap')) continue;
    const file = path.join(dir, rel);
    const stat = await fs.stat(file);
    if (stat.mtimeMs < since) continue;
    const text = await fs.readFile(file, 'utf8');
    const times = [...text.matchAll(/^# time=([\d.]+)ms$/gm)];
    const last = times.at(-1);
    // No closing time: the file was killed (its timeout) or crashed; it ran at least until its results were last written.
    out.push({ file: rel.slice(0, -'.tap'.length), ms: last ? Number(last[1]) : stat.mtimeMs - since, ok: !!last && !/^not ok /m.test(text) });
  }
  return out.sort((a, b) => b.ms - a.ms);
}

/** The closing note: the `n` slowest files of the run and the sum of all files' times against the run's wall time. */
export async function slowestFiles(since: number, until: number, n: number, dir = RESULTS): Promise<string> {
  const times = await fileTimes(since, dir);
  if (times.length < 2) return '';
  const sec = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const sum = times.reduce((s, f) => s + f.ms, 0);
  const width = Math.max(...times.slice(0, n).map((f) => f.file.length));
  const lines = times.slice(0, n).map((f) => `#   ${sec(f.ms).padStart(8)}  ${f.ok ? f.file : `${f.file.padEnd(width)}  (failed)`}`);
  return `\n# The ${Math.min(n, times.length)} slowest of ${times.length} files (each file's own time; they run several at once):\n${lines.join('\n')}\n# All files: ${sec(sum)} in ${sec(until - since)} of wall time.\n`;
}
