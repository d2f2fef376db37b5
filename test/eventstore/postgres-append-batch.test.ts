import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import t from 'tap';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { testDatabase } from '../helpers/db.ts';

// es_append decides a group-commit batch as if its appends ran one after
// another: each sees the revisions the earlier ones left, positions follow in
// batch order, refused appends take no position. Held here to a model of that
// rule over random batches of both shapes: every stream once (the usual batch
// of concurrent commands), and streams repeated or guarded by an appended one
// (where an append's outcome depends on its neighbours').

const { db } = await testDatabase(t);
const store = await PostgresEventStore.open(db);
t.teardown(() => store.close());

const NAMES = ['a', 'b', 'c', 'd'];
// -3 any, -2 stream_exists, -1 no_stream, >= 0 exact.
const expectation = fc.oneof(fc.constantFrom(-3, -2, -1), fc.integer({ min: 0, max: 3 }));
const append = fc.record({
  stream: fc.constantFrom(...NAMES),
  expected: expectation,
  count: fc.integer({ min: 0, max: 3 }),
  guard: fc.option(fc.record({ stream: fc.constantFrom(...NAMES), expected: fc.integer({ min: -1, max: 3 }) }), { nil: undefined }),
});
const scenario = fc.record({
  // How many events each stream holds before the batch (0: it does not exist).
  initial: fc.tuple(...NAMES.map(() => fc.integer({ min: 0, max: 3 }))),
  batch: fc.array(append, { minLength: 1, maxLength: 8 }),
  // Every stream once, half of the time.
  distinct: fc.boolean(),
});

type Row = { ok: boolean; actual: string; guard_actual: string | null; last_revision: string | null; last_position: string | null };

let run = 0;
t.test('es_append: any batch lands as its appends would one after another', async (t) => {
  let shapes = { distinct: 0, entangled: 0 };
  await fc.assert(
    fc.asyncProperty(scenario, async ({ initial, batch, distinct }) => {
      const prefix = `r${run++}-`;
      if (distinct) {
        const seen = new Set<string>();
        batch = batch.filter((a) => !seen.has(a.stream) && seen.add(a.stream)).map((a) => (a.guard && seen.has(a.guard.stream) ? { ...a, guard: undefined } : a));
      }
      const streamsOf = new Set(batch.map((a) => a.stream));
      const entangled = streamsOf.size < batch.length || batch.some((a) => a.guard && streamsOf.has(a.guard.stream));
      shapes = entangled ? { ...shapes, entangled: shapes.entangled + 1 } : { ...shapes, distinct: shapes.distinct + 1 };

      for (const [i, n] of initial.entries()) {
        if (n > 0) await store.appendToStream(`${prefix}${NAMES[i]}`, Array.from({ length: n }, () => ({ type: 'seeded', data: {}, metadata: { org_id: 'org_test' } })));
      }
      const { rows: heads } = await db.query<{ position: string }>('SELECT position::text FROM es_log_head');
      const head0 = BigInt(heads[0]!.position);

      // The model.
      const revs = new Map<string, bigint>(initial.map((n, i) => [NAMES[i]!, BigInt(n) - 1n]));
      let head = head0;
      const want: Row[] = [];
      const wantEvents: { stream: string; revision: string; position: string }[] = [];
      for (const a of batch) {
        let cur = revs.get(a.stream)!;
        const g = a.guard ? revs.get(a.guard.stream)! : undefined;
        const ex = BigInt(a.expected);
        const ok = (g === undefined || g === BigInt(a.guard!.expected)) && (ex === -3n || (ex === -1n && cur === -1n) || (ex === -2n && cur !== -1n) || (ex >= 0n && cur === ex));
        if (ok) {
          for (let k = 1; k <= a.count; k++) wantEvents.push({ stream: `${prefix}${a.stream}`, revision: String(cur + BigInt(k)), position: String(head + BigInt(k)) });
          head += BigInt(a.count);
          cur += BigInt(a.count);
          revs.set(a.stream, cur);
        }
        want.push({ ok, actual: String(cur), guard_actual: g === undefined ? null : String(g), last_revision: ok ? String(cur) : null, last_position: ok ? String(head) : null });
      }

      // The function, called as the store calls it.
      const events = batch.flatMap((a, ai) => Array.from({ length: a.count }, (_, k) => ({ ai: ai + 1, k: k + 1 })));
      const { rows } = await db.query<Row>(
        `SELECT ok, actual::text, guard_actual::text, last_revision::text, last_position::text
           FROM es_append($1::text[], $2::bigint[], $3::int[], $4::int[], $5::int[], $6::uuid[], $7::text[], $8::json, $9::json, $10::text[], $11::bigint[], NULL, $12::text[], $13::bigint[], $14::text[], $15::text[])`,
        [
          batch.map((a) => `${prefix}${a.stream}`),
          batch.map((a) => String(a.expected)),
          batch.map((a) => a.count),
          events.map((e) => e.ai),
          events.map((e) => e.k),
          events.map(() => randomUUID()),
          events.map(() => 'batched'),
          `[${events.map((e) => JSON.stringify({ ai: e.ai, k: e.k })).join(',')}]`,
          `[${events.map(() => '{}').join(',')}]`,
          batch.map((a) => (a.guard ? `${prefix}${a.guard.stream}` : null)),
          batch.map((a) => (a.guard ? String(a.guard.expected) : null)),
          // No organization: nothing of the audit chain's links is asked of these appends.
          batch.map(() => null),
          batch.map(() => null),
          batch.map(() => null),
          batch.map(() => null),
        ],
      );
      assert.deepEqual(rows, want, `answers (${entangled ? 'entangled' : 'distinct'} batch)`);
      const { rows: written } = await db.query<{ stream: string; revision: string; position: string }>(
        'SELECT e.stream_name AS stream, e.stream_revision::text AS revision, e.position::text AS position FROM es_events e WHERE e.position > $1 ORDER BY e.position',
        [head0.toString()],
      );
      assert.deepEqual(written, wantEvents, 'events written');
      const { rows: after } = await db.query<{ position: string }>('SELECT position::text FROM es_log_head');
      assert.equal(after[0]!.position, String(head), 'head');
      return true;
    }),
    { numRuns: 120 },
  );
  t.pass('120 random batches answered and written as the sequential rule says');
  t.ok(shapes.distinct > 20 && shapes.entangled > 20, `both shapes exercised (${shapes.distinct} distinct, ${shapes.entangled} entangled)`);
});
