import t from 'tap';
import { arrayLiteral } from '../../src/postgres/array-literal.ts';
import { testDatabase } from '../helpers/db.ts';

// arrayLiteral: what the rebuild's rows rely on. Every string reads back from
// PostgreSQL exactly as it was, whatever it holds; null is NULL; booleans are
// booleans; the order is kept.

const hard = [
  'plain',
  '',
  'with "quotes" and \\backslashes\\',
  'a literal \\n, \\t and \\u0041 (backslash then letter)',
  'comma, {braces} and spaces',
  'NULL',
  'null',
  'true',
  ' leading and trailing ',
  'tab\there, newline\nthere, return\r, bell\u0007, nul-free',
  'é € 😀 \u2028 \u2029',
  '{"n":1,"note":"a\\tb"}',
  '\\',
  '"',
  '\\\\"',
];

t.test('strings read back exactly, whether or not one of them needs the slow path', async (t) => {
  const { db } = await testDatabase(t);
  for (const values of [hard, hard.filter((s) => !/[\u0000-\u001f]/.test(s)), ['only', 'simple', 'ones']]) {
    const { rows } = await db.query<{ v: string | null }>('SELECT v FROM unnest($1::text[]) WITH ORDINALITY AS x(v, i) ORDER BY i', [arrayLiteral(values)]);
    t.same(
      rows.map((r) => r.v),
      values,
    );
  }
});

t.test('the JSON text serves as it is when it holds no escape but quotes and backslashes', async (t) => {
  t.equal(arrayLiteral(['a', 'b"c', 'd\\e', null, true]), '{"a","b\\"c","d\\\\e",null,true}');
  // A control character: every string quoted by hand (no JSON escape inside).
  t.equal(arrayLiteral(['a\tb', '"', null]), '{"a\tb","\\"",NULL}');
});

t.test('null is NULL, not the string; booleans and an empty array', async (t) => {
  const { db } = await testDatabase(t);
  const texts = await db.query<{ v: string | null; isnull: boolean }>('SELECT v, v IS NULL AS isnull FROM unnest($1::text[]) AS x(v)', [arrayLiteral(['a', null, 'null', 'NULL', null])]);
  t.same(
    texts.rows.map((r) => [r.v, r.isnull]),
    [
      ['a', false],
      [null, true],
      ['null', false],
      ['NULL', false],
      [null, true],
    ],
  );
  // The slow path too (a control character elsewhere in the array).
  const slow = await db.query<{ v: string | null }>('SELECT v FROM unnest($1::text[]) AS x(v)', [arrayLiteral(['x\ny', null, 'null'])]);
  t.same(
    slow.rows.map((r) => r.v),
    ['x\ny', null, 'null'],
  );
  const bools = await db.query<{ v: boolean | null }>('SELECT v FROM unnest($1::boolean[]) AS x(v)', [arrayLiteral([true, false, null])]);
  t.same(
    bools.rows.map((r) => r.v),
    [true, false, null],
  );
  const none = await db.query<{ n: string }>('SELECT count(*)::text AS n FROM unnest($1::text[]) AS x(v)', [arrayLiteral([])]);
  t.equal(none.rows[0]!.n, '0');
});
