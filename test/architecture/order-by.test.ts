import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';

// An ORDER BY names a timestamp column with its table (`approvals.created_at`).
// The select lists render timestamps as ISO text under the column's own name
// (`to_char(created_at …) AS created_at`), and PostgreSQL reads a bare name in
// ORDER BY as that output column first: the text, computed for every row of
// the organization and sorted, instead of the index's order. At 100 000
// approvals, GET /v1/approvals took 450 ms that way and 12 ms qualified.

const roots = ['src', 'projections', 'commands'];
const files: string[] = [];
const walk = (dir: string) => {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (/\.tsx?$/.test(name)) files.push(p);
  }
};
for (const r of roots) walk(r);

t.test('every ORDER BY qualifies its timestamp columns', async (t) => {
  const bare: string[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/ORDER BY ([^`'\n;]*)/g)) {
      // Each sort key: a bare name ending in _at (not inside a call such as coalesce(...), not table.column).
      for (const key of m[1]!.split(',')) {
        const k = key.trim().replace(/\s+(ASC|DESC)\b.*$/i, '').replace(/\s+LIMIT\b.*$/i, '');
        if (/^[a-z_]+_at$/.test(k)) bare.push(`${file}:${text.slice(0, m.index).split('\n').length}: ORDER BY … ${k}`);
      }
    }
  }
  t.same(bare, [], 'name the table: ORDER BY approvals.created_at, not ORDER BY created_at');
});
