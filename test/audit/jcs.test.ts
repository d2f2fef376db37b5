import reference from 'canonicalize';
import t from 'tap';
import { canonicalize } from '../../src/audit/hash.ts';

// The service's RFC 8785 canonicalizer against the `canonicalize` package (the
// reference implementation it replaced): the same text for every JSON value,
// and a refusal for every value without a canonical form.

/** A small deterministic generator (mulberry32), so a failure names its seed. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = ['a', 'b', 'Z', '0', '_', ' ', '"', '\\', '/', '\n', '\r', '\t', '\u0000', '\u001f', '\u007f', 'é', '€', '\u2028', '\u2029', '😀', '\ud83d\ude00', '中', '\ufeff'];
const NUMBERS = [0, -0, 1, -1, 0.1, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, 2 ** 53, -(2 ** 53) - 2, 123456789.125, 1 / 3, 100, 1e20, 4.5e-10];

function value(r: () => number, depth: number): unknown {
  const k = Math.floor(r() * (depth > 3 ? 4 : 7));
  const string = () => Array.from({ length: Math.floor(r() * 8) }, () => ALPHABET[Math.floor(r() * ALPHABET.length)]).join('');
  switch (k) {
    case 0:
      return string();
    case 1:
      return r() < 0.5 ? NUMBERS[Math.floor(r() * NUMBERS.length)] : (r() - 0.5) * 10 ** Math.floor(r() * 30 - 10);
    case 2:
      return r() < 0.5;
    case 3:
      return null;
    case 4:
    case 5: {
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(r() * 6); i > 0; i--) o[string()] = r() < 0.1 ? undefined : value(r, depth + 1);
      return o;
    }
    default:
      return Array.from({ length: Math.floor(r() * 5) }, () => (r() < 0.1 ? undefined : value(r, depth + 1)));
  }
}

t.test('the same text as the reference for generated values', async (t) => {
  let differ = 0;
  for (let seed = 1; seed <= 3000; seed++) {
    const v = value(rng(seed), 0);
    if (canonicalize(v) !== reference(v)) {
      differ++;
      if (differ <= 3) t.fail(`seed ${seed}: ${canonicalize(v)} != ${reference(v)}`);
    }
  }
  t.equal(differ, 0, '3 000 values, same text');
});

t.test('a value parsed back from its canonical text (keys already in order) gives that text again', async (t) => {
  // The case of every envelope the verifiers read: canonicalize then takes the
  // path for values already in key order (JSON.stringify); it must agree.
  let differ = 0;
  let checked = 0;
  for (let seed = 1; seed <= 3000; seed++) {
    let text: string | undefined;
    try {
      text = reference(value(rng(seed), 0));
    } catch {
      continue;
    }
    if (text === undefined) continue;
    checked++;
    if (canonicalize(JSON.parse(text)) !== text) {
      differ++;
      if (differ <= 3) t.fail(`seed ${seed}: ${canonicalize(JSON.parse(text))} != ${text}`);
    }
  }
  t.ok(checked > 2500, `${checked} texts read back`);
  t.equal(differ, 0, 'same text');
  t.throws(() => canonicalize({ a: 1, b: '\ud800' }), 'a lone surrogate in a value, keys in order');
  t.throws(() => canonicalize({ '\udc00': 1 }), 'a lone surrogate in a key');
  t.throws(() => canonicalize({ a: [1, NaN] }), 'NaN, keys in order');
  t.equal(canonicalize({ a: 1, b: undefined, c: [undefined] }), '{"a":1,"c":[null]}', 'undefined members skipped, undefined elements null');
  t.equal(canonicalize({ a: new Date(0) }), '{"a":"1970-01-01T00:00:00.000Z"}', 'toJSON honoured');
});

t.test('the RFC 8785 examples and edge cases', async (t) => {
  const cases: unknown[] = [
    { numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001], string: '\u20ac$\u000f\u000aA\'\u0042\u0022\u005c\\"/', literals: [null, true, false] },
    { '\u20ac': 'Euro Sign', '\r': 'Carriage Return', '\ufb33': 'Hebrew Letter Dalet With Dagesh', '1': 'One', '\ud83d\ude00': 'Emoji: Grinning Face', '\u0080': 'Control', '\u00f6': 'Latin Small Letter O With Diaeresis' },
    { at: new Date(Date.UTC(2026, 10, 24, 12, 0, 0)) },
    [undefined, 1, { a: undefined, b: 2 }],
    { b: { d: [], c: {} }, a: '' },
  ];
  for (const c of cases) t.equal(canonicalize(c), reference(c));
  t.equal(canonicalize({ numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001] }), '{"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27]}', 'RFC 8785 section 3.2.2 numbers');
});

t.test('values without a canonical form are refused, as by the reference', async (t) => {
  const refused: unknown[] = [NaN, Infinity, -Infinity, { a: NaN }, ['\ud800'], { '\udc00': 1 }, 'x\ud83d', undefined, 1n];
  for (const v of refused) {
    t.throws(() => canonicalize(v), `refused: ${String(v)}`);
    t.throws(() => {
      if (reference(v as object) === undefined) throw new Error('undefined');
    }, `the reference refuses it too: ${String(v)}`);
  }
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  t.throws(() => canonicalize(cyclic), 'a cycle is refused');
  let deep: unknown = 1;
  for (let i = 0; i < 300; i++) deep = [deep];
  t.throws(() => canonicalize(deep), 'nesting deeper than the limit is refused');
});
