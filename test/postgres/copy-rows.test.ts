import t from 'tap';
import { testDatabase } from '../helpers/db.ts';

// Transaction.copyRows (COPY ... FROM STDIN, text format), the rebuild's bulk
// insert: every value comes back exactly as written, whatever characters the
// text format must escape; a refused row fails the transaction and leaves nothing.

t.test('values round-trip through COPY exactly', async (t) => {
  const { db } = await testDatabase(t);
  await db.query(`CREATE TABLE c (id text PRIMARY KEY, name text, flag boolean, n bigint, doc jsonb, at timestamptz)`);
  const awkward = ['tab\there', 'line\nbreak', 'cr\rhere', 'back\\slash', '\\N', '\\', 'trailing\\', 'quote " and \' both', 'é€😀 ünïcode', '', ' leading space', '\u2028sep'];
  const rows: unknown[][] = awkward.map((name, i) => [`r${i}`, name, i % 2 === 0, BigInt(2) ** BigInt(60) + BigInt(i), { name, nested: { list: [1, null, 'x\ty'] } }, new Date(Date.UTC(2026, 10, 24, 12, 0, i))]);
  rows.push(['nulls', null, null, null, null, null]);
  await db.transaction((tx) => tx.copyRows('c', ['id', 'name', 'flag', 'n', 'doc', 'at'], rows));
  const { rows: back } = await db.query<{ id: string; name: string | null; flag: boolean | null; n: string | null; doc: unknown; at: Date | null }>(`SELECT * FROM c`);
  const byId = new Map(back.map((r) => [r.id, r]));
  t.equal(back.length, rows.length, 'every row');
  awkward.forEach((name, i) => {
    const r = byId.get(`r${i}`)!;
    t.equal(r.name, name, `text ${i}`);
    t.same(r.doc, { name, nested: { list: [1, null, 'x\ty'] } }, `json ${i}`);
    t.equal(r.flag, i % 2 === 0);
    t.equal(r.n, (BigInt(2) ** BigInt(60) + BigInt(i)).toString());
    t.equal(r.at!.toISOString(), new Date(Date.UTC(2026, 10, 24, 12, 0, i)).toISOString());
  });
  t.same(byId.get('nulls'), { id: 'nulls', name: null, flag: null, n: null, doc: null, at: null }, 'null is NULL');
});

t.test('a refused row fails the transaction and nothing is written', async (t) => {
  const { db } = await testDatabase(t);
  await db.query(`CREATE TABLE c (id text PRIMARY KEY, name text NOT NULL)`);
  await t.rejects(db.transaction(async (tx) => {
    await tx.query(`INSERT INTO c VALUES ('before', 'x')`);
    await tx.copyRows('c', ['id', 'name'], [['a', 'one'], ['a', 'duplicate']]);
  }));
  t.equal((await db.query(`SELECT count(*)::int AS n FROM c`)).rows[0]!.n, 0, 'rolled back, the earlier statement too');
  // The pool's connection is usable afterwards.
  await db.transaction((tx) => tx.copyRows('c', ['id', 'name'], [['b', 'two']]));
  t.equal((await db.query(`SELECT count(*)::int AS n FROM c`)).rows[0]!.n, 1);
  await t.rejects(db.transaction((tx) => tx.copyRows('c; DROP TABLE c', ['id'], [['x']])), /not a plain identifier/);
});
