import t from 'tap';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileTimes, slowestFiles } from '../../scripts/tap.ts';

// The closing note of `npm test` (scripts/tap.ts): the slowest files of this
// run, read from tap's per-file results; a file's result left by an earlier
// run is not this run's.

t.test('the slowest files of the run, slowest first, failures marked, older results left out', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'slowest-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const write = async (rel: string, body: string, mtime: Date) => {
    await fs.mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await fs.writeFile(path.join(dir, rel), body);
    await fs.utimes(path.join(dir, rel), mtime, mtime);
  };
  const since = Date.parse('2026-11-29T06:00:00Z');
  const during = new Date(since + 60_000);
  await write('test/http/a.test.ts.tap', '# Subtest: x\n    ok 1 - y # time=10.5ms\n    1..1\nok 1 - x # time=12ms\n\n1..1\n# time=2500.25ms\n', during);
  await write('test/cluster/b.test.ts.tap', 'not ok 1 - x # time=90000ms\n\n1..1\n# time=91000.5ms\n', during);
  await write('test/audit/c.test.ts.tap', 'ok 1 - x\n1..1\n# time=400ms\n', during);
  await write('test/old.test.ts.tap', 'ok 1 - x\n1..1\n# time=999999ms\n', new Date(since - 60_000));
  await write('test/notes.txt', '# time=5ms\n', during);
  // Killed at its timeout: no closing time; it ran until its results were last written.
  await write('test/killed.test.ts.tap', 'ok 1 - x # time=5ms\n', during);

  t.same(await fileTimes(since, dir), [
    { file: 'test/cluster/b.test.ts', ms: 91000.5, ok: false },
    { file: 'test/killed.test.ts', ms: 60_000, ok: false },
    { file: 'test/http/a.test.ts', ms: 2500.25, ok: true },
    { file: 'test/audit/c.test.ts', ms: 400, ok: true },
  ]);
  const note = await slowestFiles(since, since + 100_000, 3, dir);
  t.match(note, /The 3 slowest of 4 files/);
  t.match(note, /91\.0 s {2}test\/cluster\/b\.test\.ts {2}\(failed\)\n#\s+60\.0 s {2}test\/killed\.test\.ts {5}\(failed\)\n#\s+2\.5 s {2}test\/http\/a\.test\.ts\n/);
  t.notMatch(note, /c\.test\.ts|old\.test\.ts/);
  t.match(note, /All files: 153\.9 s in 100\.0 s of wall time/);
});
