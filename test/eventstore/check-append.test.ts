import t from 'tap';
import { randomUUID } from 'node:crypto';
import { checkAppend, InvalidEvent } from '../../src/eventstore/port.ts';

// checkAppend's JSON rule, at its edges: what it accepts is exactly what
// survives JSON text unchanged (so a recorded event may carry the appended
// values themselves), and a refusal names where the value went wrong.

const nest = (levels: number, leaf: unknown): unknown => (levels === 0 ? leaf : { a: nest(levels - 1, leaf) });
const append = (data: unknown) => checkAppend('edge-1', [{ type: 'test.a', data: data as never, metadata: { org_id: 'org_edge' } }], 'any', randomUUID);

t.test('nesting: values 64 levels below the data object are accepted, at 65 refused', async (t) => {
  const ok = append(nest(63, { leaf: true }))[0]!;
  t.same(JSON.parse(ok.data), ok.dataValue, 'the accepted value equals its text read back');
  t.ok(append(nest(64, 1)), 'a plain value at 64');
  t.throws(() => append(nest(64, { leaf: true })), InvalidEvent, 'a value at 65: refused');
  t.throws(() => append(nest(65, 1)), InvalidEvent, 'a plain value at 65 too');
});

t.test('a refusal names the path of the offending value', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [{ a: { b: [1, 2, { c: undefined }] } }, /data\.a\.b\[2\]\.c: a undefined is not JSON/],
    [{ n: Number.POSITIVE_INFINITY }, /data\.n: Infinity is not a JSON number/],
    [{ d: new Date(0) }, /data\.d: not a plain object/],
    [{ x: [10n] }, /data\.x\[0\]: a bigint is not JSON/],
  ];
  for (const [data, message] of cases) t.throws(() => append(data), message);
});

t.test('objects without a prototype and arrays of every JSON kind are accepted, values equal to their text', async (t) => {
  const bare = Object.assign(Object.create(null) as Record<string, unknown>, { k: 'v' });
  const data = { bare, list: [null, true, 0, -1.5, 'é€😀', [], {}], s: '\u2028' };
  const [e] = append(data);
  t.same(JSON.parse(e!.data), JSON.parse(JSON.stringify(data)));
});

t.test('strings the read side and the audit chain cannot hold are refused: U+0000 and lone surrogates, in values and keys', async (t) => {
  for (const [data, what] of [
    [{ name: 'a\u0000b' }, 'U+0000 in a value'],
    [{ ['k\u0000']: 1 }, 'U+0000 in a key'],
    [{ deep: [{ x: '\ud800' }] }, 'a lone high surrogate'],
    [{ x: 'tail\udfff' }, 'a lone low surrogate'],
    [{ x: '\udc00\ud800' }, 'surrogates in the wrong order'],
  ] as const) {
    t.throws(() => append(data), InvalidEvent, what);
  }
  t.throws(() => checkAppend('edge-1', [{ type: 'test.a', data: {}, metadata: { org_id: 'org_edge', note: '\u0000' } }], 'any', randomUUID), InvalidEvent, 'in metadata too');
  // What looks like an escape but is text stays accepted; other control characters and pairs too.
  for (const data of [{ x: '\\u0000' }, { x: '\\\\\\ud800' }, { x: '\u0001\u001f' }, { x: '😀' }, { ['\\u0000']: '\ud83d\ude00' }]) {
    const [e] = append(data);
    t.same(JSON.parse(e!.data), data, `accepted: ${JSON.stringify(data)}`);
  }
});
