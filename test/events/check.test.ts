import t from 'tap';
import { z } from 'zod';
import { inShape } from '../../events/check.ts';
import { eventSchemas, eventTypes, normalizeEvent, parseEvent } from '../../events/index.ts';

// A read of an event answers its data as it is when it is exactly in its
// schema's shape (events/check.ts), else zod's copy. What readers rely on:
// the answer is always what zod would answer (equal content), and bad data
// is refused as zod refuses it. Checked for every event type on data made
// from its schema, then on that data broken member by member.

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Schema = { [k: string]: unknown };

// Strings the schemas' patterns ask for (a time, an integer text, a SHA-256 hex), else a plain one.
const CANDIDATES = ['2026-11-30T02:00:00.000Z', '1250', 'a'.repeat(64), 'x'];

/** A value in the schema's shape; `full`: optional members too. */
function sample(s: Schema, full: boolean): Json {
  if ('const' in s) return s.const as Json;
  if (Array.isArray(s.enum)) return s.enum[0] as Json;
  if (Array.isArray(s.anyOf)) return sample(s.anyOf[0] as Schema, full);
  const type = Array.isArray(s.type) ? (s.type as string[]).find((x) => x !== 'null') : (s.type as string | undefined);
  switch (type) {
    case 'string': {
      const re = typeof s.pattern === 'string' ? new RegExp(s.pattern) : undefined;
      return CANDIDATES.find((c) => !re || re.test(c)) ?? 'x';
    }
    case 'integer':
      return typeof s.minimum === 'number' && s.minimum > 1 ? s.minimum : 1;
    case 'number':
      return 1.5;
    case 'boolean':
      return true;
    case 'array':
      return Array.from({ length: Math.max(1, (s.minItems as number | undefined) ?? 1) }, () => sample(s.items as Schema, full));
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, Schema>;
      const required = new Set((s.required ?? []) as string[]);
      const out: Record<string, Json> = {};
      for (const [k, v] of Object.entries(props)) if (full || required.has(k)) out[k] = sample(v, full);
      if (Object.keys(props).length === 0 && s.additionalProperties !== false) out.k = 'v';
      return out;
    }
    default:
      return { any: [1, 'two'] };
  }
}

/** Every path to a member or element of `v`. */
function paths(v: Json, at: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(v)) return v.flatMap((x, i) => [[...at, i], ...paths(x, [...at, i])]);
  if (v !== null && typeof v === 'object') return Object.entries(v).flatMap(([k, x]) => [[...at, k], ...paths(x, [...at, k])]);
  return [];
}

function edit(v: Json, path: (string | number)[], change: (parent: Record<string | number, unknown>, key: string | number) => void): Json {
  const copy = structuredClone(v);
  let parent = copy as unknown as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  change(parent, path[path.length - 1]!);
  return copy;
}

/** JSON text with every object's members sorted: equal content, equal text (members left undefined are absent, as in JSON). */
const canon = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) => (x !== null && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x));

const REPLACEMENTS: unknown[] = [null, 0, 1.5, -1, Number.NaN, Number.POSITIVE_INFINITY, '', 'x', '2026-13-40T99:00:00Z', true, [], {}, undefined];

t.test('for every event type: data in shape is answered as it is, anything else exactly as zod answers it', async (t) => {
  let inShapeAnswered = 0;
  let zodAnswered = 0;
  let refused = 0;
  for (const type of eventTypes) {
    const schema = eventSchemas[type] as z.ZodType;
    const json = z.toJSONSchema(schema, { io: 'output' }) as Schema;
    const variants: unknown[] = [];
    for (const full of [true, false]) {
      const base = sample(json, full);
      t.ok(schema.safeParse(base).success, `${type}: the sample is valid (${full ? 'every member' : 'required members'})`);
      t.ok(inShape(type, schema, base), `${type}: the sample is in shape`);
      const read = parseEvent(type, base);
      t.equal(read.data, base, `${type}: answered as it is, not copied`);
      t.same(normalizeEvent(type, base).data, base, `${type}: zod's copy is equal`);
      variants.push(base);
      for (const p of paths(base)) {
        variants.push(edit(base, p, (o, k) => delete o[k]));
        for (const r of REPLACEMENTS) variants.push(edit(base, p, (o, k) => (o[k] = r)));
        variants.push(edit(base, p, (o, k) => (o[k] = { nested: o[k] })));
      }
      // A member the schema does not name, at the top and in each nested object.
      variants.push({ ...(base as object), unnamed: 1 });
      for (const p of paths(base)) variants.push(edit(base, p, (o, k) => typeof o[k] === 'object' && o[k] !== null && !Array.isArray(o[k]) && ((o[k] as Record<string, unknown>).unnamed = 'x')));
    }
    // Each variant's answer against zod's; what differs is listed (one assertion per type).
    const differs: string[] = [];
    for (const v of variants) {
      const z1 = schema.safeParse(v);
      if (inShape(type, schema, v)) {
        // In shape: zod accepts it and would answer an equal copy.
        if (!z1.success || canon(z1.data) !== canon(v)) differs.push(`in shape, zod answers otherwise: ${JSON.stringify(v)}`);
        inShapeAnswered++;
        continue;
      }
      if (z1.success) {
        if (canon(parseEvent(type, v).data) !== canon(z1.data)) differs.push(`not zod's answer: ${JSON.stringify(v)}`);
        zodAnswered++;
      } else {
        let threw = false;
        try {
          parseEvent(type, v);
        } catch {
          threw = true;
        }
        if (!threw) differs.push(`accepted, zod refuses: ${JSON.stringify(v)}`);
        refused++;
      }
    }
    t.same(differs, [], `${type}: ${variants.length} variants answered as zod answers them`);
  }
  t.ok(inShapeAnswered > eventTypes.length * 2 && zodAnswered > eventTypes.length && refused > eventTypes.length * 10, `${inShapeAnswered} in shape, ${zodAnswered} copied by zod, ${refused} refused`);
});

t.test('an unknown type is refused either way', async (t) => {
  t.throws(() => parseEvent('no.such_event', {}), /unknown event type/);
  t.throws(() => normalizeEvent('no.such_event', {}), /unknown event type/);
});
