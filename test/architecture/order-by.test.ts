import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';

// An ORDER BY names a timestamp column with its table (`approvals.created_at`).
// The select lists render timestamps as ISO text under the column's own name
// (`to_char(created_at …) AS created_at`), and PostgreSQL reads a bare name in
// ORDER BY as that output column first: the text, computed for every row of
// the organization and sorted, instead of the index's order. At 100 000
// approvals, GET /v1/approvals took 450 ms that way and 12 ms qualified; and
// `seq::text AS seq … ORDER BY seq` sorted numbers as text ('9' after '10').

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

/** Names a select list gives to an expression (`seq::text AS seq`, `to_char(…) AS created_at`, `id::text`), not a plain rename of another column. */
const renderedIn = (sql: string) =>
  new Set([
    ...[...sql.matchAll(/(?:\)|\}|::[a-z]+)\s+AS\s+([a-z_]+)\b/g)].map((m) => m[1]!),
    // A cast keeps the column's name: `id::text` is an output column named id, and ORDER BY id sorts that text.
    ...[...sql.matchAll(/(?<![.\w])([a-z_]+)::[a-z]+\b(?!\s+AS\b)/g)].map((m) => m[1]!),
  ]);

t.test('every ORDER BY qualifies its timestamp columns and any column its query renders under its own name', async (t) => {
  const bare: string[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    // The file's column lists (`const COLUMNS = `…``), which queries interpolate.
    const lists = new Map([...text.matchAll(/const ([A-Z_]+) = `([^`]*)`/g)].map((m) => [m[1]!, m[2]!]));
    for (const m of text.matchAll(/ORDER BY ([^`'\n;]*)/g)) {
      // The query: from its opening quote to the ORDER BY, with the column lists it interpolates.
      const before = text.slice(0, m.index);
      // (A template's opening backtick, or the call whose plain string holds the query.)
      const tick = before.lastIndexOf('`');
      const call = Math.max(before.lastIndexOf('query('), before.lastIndexOf('query<'));
      const query = before.slice(tick > call ? tick : call);
      const names = renderedIn([query, ...[...query.matchAll(/\$\{([A-Z_]+)\}/g)].map((x) => lists.get(x[1]!) ?? '')].join('\n'));
      // Each sort key that is a bare name (not inside a call such as coalesce(...), not table.column).
      for (const key of m[1]!.split(',')) {
        const k = key.trim().replace(/\s+(ASC|DESC)\b.*$/i, '').replace(/\s+LIMIT\b.*$/i, '');
        if (/^[a-z_]+_at$/.test(k) || names.has(k)) bare.push(`${file}:${before.split('\n').length}: ORDER BY … ${k}`);
      }
    }
  }
  t.same(bare, [], 'name the table: ORDER BY approvals.created_at, tool_calls.seq, not the bare name');
});
