import t from 'tap';
import { isServerError, RolledBack } from '../../src/postgres/db.ts';
import { testDatabase } from '../helpers/db.ts';

// Db.transaction pipelines: a statement goes out when it is issued, without
// waiting for the answers before it. What callers rely on: answers come back
// to the statement that asked, in order; a failing statement fails every
// statement after it in the transaction and nothing is committed; a failure
// nobody awaited still keeps the transaction from committing.

t.test('statements issued together are answered each with its own rows, in order, and commit together', async (t) => {
  const { db } = await testDatabase(t);
  await db.query('CREATE TABLE p (id int PRIMARY KEY, v text NOT NULL)');
  const answers = await db.transaction(async (tx) => {
    // None awaited before the next is issued.
    const issued = Array.from({ length: 20 }, (_, i) => tx.query<{ id: number; v: string }>('INSERT INTO p VALUES ($1, $2) RETURNING id, v', [i, `v${i}`]));
    const count = tx.query<{ n: string }>('SELECT count(*)::text AS n FROM p');
    return { rows: (await Promise.all(issued)).map((r) => r.rows[0]), count: (await count).rows[0]!.n };
  });
  t.same(
    answers.rows,
    Array.from({ length: 20 }, (_, i) => ({ id: i, v: `v${i}` })),
    'each insert answered with its own row',
  );
  t.equal(answers.count, '20', 'a statement sees the ones issued before it');
  t.equal((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM p')).rows[0]!.n, '20', 'committed');
});

t.test('a failing statement fails the ones issued after it, and nothing of the transaction stays', async (t) => {
  const { db } = await testDatabase(t);
  await db.query('CREATE TABLE q (id int PRIMARY KEY)');
  const outcomes: string[] = [];
  const err = await db
    .transaction(async (tx) => {
      const first = tx.query('INSERT INTO q VALUES (1)');
      const dup = tx.query('INSERT INTO q VALUES (1)');
      const after = tx.query('INSERT INTO q VALUES (2)');
      for (const [name, p] of [['first', first], ['dup', dup], ['after', after]] as const) {
        outcomes.push(await p.then(() => `${name} ok`, (e: { code?: string }) => `${name} ${e.code}`));
      }
      return 'unreachable?';
    })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  t.same(outcomes, ['first ok', 'dup 23505', 'after 25P02'], 'the duplicate fails; the statement behind it is refused as in an aborted transaction');
  t.ok(err instanceof RolledBack && isServerError(err), 'COMMIT of the aborted transaction is reported, not taken for success');
  t.equal((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM q')).rows[0]!.n, '0', 'nothing committed');
});

t.test('a failure nobody awaited still keeps the transaction from committing', async (t) => {
  const { db } = await testDatabase(t);
  await db.query('CREATE TABLE r (id int PRIMARY KEY)');
  await db.query('INSERT INTO r VALUES (1)');
  const err = await db
    .transaction(async (tx) => {
      tx.query('INSERT INTO r VALUES (2)').catch(() => {});
      tx.query('INSERT INTO r VALUES (1)').catch(() => {});
      return 'done';
    })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  t.ok(err instanceof RolledBack, 'the transaction reports that it rolled back');
  t.same((await db.query<{ id: number }>('SELECT id FROM r ORDER BY id')).rows, [{ id: 1 }], 'the row issued before the failure is not committed either');
});

t.test('a connection goes back to the pool unpipelined: a plain query after a transaction behaves as before', async (t) => {
  const { db } = await testDatabase(t);
  await db.transaction((tx) => tx.query('SELECT 1'));
  const { rows } = await db.query<{ x: number }>('SELECT 41 + 1 AS x');
  t.same(rows, [{ x: 42 }]);
});

// Db.sequence: transactions one after another on one connection, each going
// out once the one before has issued its COMMIT (a rebuild's pages). What the
// rebuild relies on: each sees the ones before it committed; each answers on
// its own, a failed one with RolledBack; the connection goes back to the pool
// whenever nothing of the sequence is unanswered.

t.test('a sequence sends each transaction behind the COMMIT of the one before, unanswered; each sees the ones before', async (t) => {
  const { db } = await testDatabase(t);
  await db.query('CREATE TABLE s (id int PRIMARY KEY)');
  const seq = db.sequence();
  let firstAnswered = false;
  let secondStartedBeforeFirstAnswered: boolean | undefined;
  const first = seq.transaction(async (tx) => {
    tx.query('INSERT INTO s VALUES (1)').catch(() => {});
  });
  first.then(() => (firstAnswered = true));
  const second = seq.transaction(async (tx) => {
    secondStartedBeforeFirstAnswered = !firstAnswered;
    // Queued behind the first one's COMMIT on the same connection: it sees the row.
    const { rows } = await tx.query<{ n: string }>('SELECT count(*)::text AS n FROM s');
    await tx.query('INSERT INTO s VALUES (2)');
    return rows[0]!.n;
  });
  t.equal(await second, '1', "the second transaction saw the first one's row committed");
  await first;
  t.equal(secondStartedBeforeFirstAnswered, true, "the second was built before the first's COMMIT was answered");
  await seq.close();
  t.same((await db.query('SELECT id FROM s ORDER BY id')).rows, [{ id: 1 }, { id: 2 }]);
});

t.test('in a sequence a failed transaction rolls back alone and says so; the connection is given back when idle', async (t) => {
  const { db } = await testDatabase(t, { poolMax: 1 });
  await db.query('CREATE TABLE f (id int PRIMARY KEY)');
  const seq = db.sequence();
  const a = seq.transaction(async (tx) => {
    tx.query('INSERT INTO f VALUES (1)').catch(() => {});
  });
  // Its failure is not awaited here: the COMMIT answers ROLLBACK.
  const b = seq.transaction(async (tx) => {
    tx.query('INSERT INTO f VALUES (1)').catch(() => {});
    tx.query('INSERT INTO f VALUES (3)').catch(() => {});
  });
  const c = seq.transaction(async (tx) => {
    tx.query('INSERT INTO f VALUES (2)').catch(() => {});
  });
  await a;
  const failed = await b.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(failed instanceof RolledBack, 'the failed one rolled back, and says so');
  await c;
  // A pool of one: the sequence holds no connection while nothing of it is unanswered.
  t.same((await db.query('SELECT id FROM f ORDER BY id')).rows, [{ id: 1 }, { id: 2 }], 'the others committed, nothing of the failed one');
  const d = seq.transaction(async (tx) => {
    await tx.query('INSERT INTO f VALUES (4)');
  });
  await d;
  await seq.close();
  t.equal((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM f')).rows[0]!.n, '3', 'a transaction after a pause, on the connection taken again');
});
