import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// The typecheck, as one file of the suite. `npm test` emits the compiled tree
// with `tsc --noCheck` (seconds), so the checking itself (the longest single
// step of a run on a clean clone) runs here, on a core the other files are not
// using, instead of before every file. Incremental: its state is kept in
// .build/.typecheck.tsbuildinfo. `npm run typecheck` is the same check alone.

// .build/tsconfig.json is a link to the project's own (scripts/build-tree.mjs); from the sources it is the file itself.
const root = path.dirname(fs.realpathSync(path.resolve(import.meta.dirname, '../../tsconfig.json')));
t.setTimeout(10 * 60_000);

t.test('the whole project typechecks (tsc --noEmit, strict)', async (t) => {
  const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
  const args = [tsc, '--noEmit', '-p', 'tsconfig.json', '--incremental', '--tsBuildInfoFile', '.build/.typecheck.tsbuildinfo', '--pretty', 'false'];
  const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d));
    child.stderr.on('data', (d: Buffer) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
  t.equal(code, 0, code === 0 ? 'no type errors' : `type errors:\n${output.trim()}`);
});
