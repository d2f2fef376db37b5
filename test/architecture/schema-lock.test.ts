import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';

// Instances starting together on an empty database must not race on DDL: every
// schema change runs under the one schema lock (src/postgres/schema.ts
// `migrate`). This names each file of src/ that creates or alters a table
// without going through it (projections declare their tables and the runner
// creates them under the lock).

const root = path.resolve('src');
const files = fs.readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts')).map((f) => path.join(root, f));
const DDL = /\b(CREATE (UNLOGGED )?TABLE|CREATE (UNIQUE )?INDEX|ALTER TABLE [a-z_]+ ADD)\b/;
/** The source without its comments: a comment naming DDL is not DDL. */
const code = (f: string) => fs.readFileSync(f, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

t.test('every schema change in src/ runs under the schema lock', async (t) => {
  const unlocked = files.filter((f) => DDL.test(code(f)) && !/\bmigrate\(/.test(code(f)) && !f.endsWith(path.join('postgres', 'schema.ts')));
  t.same(unlocked.map((f) => path.relative(root, f)), [], 'files with DDL outside migrate()');
  t.ok(files.length > 100, `${files.length} files read`);
});
