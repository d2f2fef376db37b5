import t from 'tap';
import { jsonText } from '../../src/http/kernel/exact-json.ts';

// jsonText: JSON.stringify's text, with a bigint as a bare integer literal.

t.test('without a bigint: exactly JSON.stringify', async (t) => {
  const bodies: unknown[] = [
    { a: 1, b: 'x', c: [1, 'two', null, true], d: { e: undefined, f: new Date(0), g: -0.5 } },
    [],
    { s: 'quotes " back\\slash \u0000 nul \u2028 line é 😀', n: 9007199254740991 },
    { nested: [{ x: [{ y: [] }] }] },
  ];
  for (const b of bodies) t.equal(jsonText(b), JSON.stringify(b));
});

t.test('a bigint is written as its exact digits', async (t) => {
  const big = 2n ** 70n + 1n;
  t.equal(jsonText({ a: big, b: [-5n, 0n, 7], c: 'x', d: { e: 10000000000000003n } }), `{"a":${big},"b":[-5,0,7],"c":"x","d":{"e":10000000000000003}}`);
  t.equal(jsonText([1n]), '[1]');
  t.equal(jsonText({ a: 12n }), JSON.stringify({ a: 12 }), 'an ordinary value writes as a number would');
});

t.test('a string of the body cannot pass for a bigint', async (t) => {
  // What a marker looks like, with any nonce: the nonce is drawn per call, after the body exists.
  const lookalikes = ['\u0000exact-int-' + 'ab'.repeat(16) + ':123', '"\u0000exact-int-00:5"', 'exact-int-:1', '\\u0000exact-int-ff:9"'];
  for (const s of lookalikes) {
    const body = { s, n: 42n, arr: [s] };
    t.equal(jsonText(body), JSON.stringify({ s, n: 42, arr: [s] }), JSON.stringify(s));
    t.same(JSON.parse(jsonText(body)), { s, n: 42, arr: [s] }, 'the string round-trips untouched');
  }
});

t.test('what JSON.stringify refuses is still refused', async (t) => {
  const cyclic: Record<string, unknown> = { n: 1n };
  cyclic.self = cyclic;
  t.throws(() => jsonText(cyclic), TypeError);
});
