import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import * as formats from 'ajv-formats';
import { JSON_SCHEMA_CACHE_MAX } from '../limits.ts';
import { boundedRegExp, PATTERN_INPUT_TOO_LONG, patternInputTooLong } from './bounded-regexp.ts';

// Tool input schemas are standard JSON Schema, checked by Ajv: draft-07 when
// the schema says so (`$schema` …/draft-07/…), 2020-12 when it says so or says
// nothing (the MCP default), with the formats of ajv-formats. A schema with
// no `$schema` that only draft-07 reads (a tuple `items: [...]`) is read as
// draft-07. Each schema is compiled once and kept by its text (a bounded cache).
// Issues keep the shape callers rely on: {path, message}, the path naming
// the offending property (the missing one for `required`, the extra one for
// `additionalProperties`). Patterns run on a linear-time engine with a bound
// on input length (src/providers/bounded-regexp.ts): a hostile pattern in a
// registered upstream's schema cannot stall the process.

/** A JSON Schema document; the catalog requires `type: "object"` at the root of a tool's input. */
export type JsonSchema = { type?: string | string[]; [keyword: string]: unknown };
export type InputIssue = { path: (string | number)[]; message: string };

// ajv-formats is CommonJS: its plugin is the module itself under Node's interop.
type FormatsPlugin = (ajv: Ajv | Ajv2020) => unknown;
const addFormats = ((formats as unknown as { default: FormatsPlugin & { default?: FormatsPlugin } }).default.default ??
  (formats as unknown as { default: FormatsPlugin }).default) as FormatsPlugin;

// verbose: errors carry the value, so a string too long for a pattern says so.
const options = { allErrors: true, strict: false, addUsedSchema: false, validateFormats: true, verbose: true, code: { regExp: boundedRegExp } } as const;
const draft07 = new Ajv(options);
const draft2020 = new Ajv2020(options);
addFormats(draft07);
addFormats(draft2020);

type Dialect = Ajv | Ajv2020;

function dialectOf(s: Record<string, unknown>): Dialect | string {
  const declared = s.$schema;
  if (declared === undefined) return draft2020.validateSchema(s) || !draft07.validateSchema(s) ? draft2020 : draft07;
  if (typeof declared !== 'string') return '$schema is not a string';
  if (/json-schema\.org\/draft-0[67]\/schema#?$/.test(declared)) return draft07;
  if (/json-schema\.org\/draft\/2020-12\/schema#?$/.test(declared)) return draft2020;
  return `$schema ${declared} is not supported (draft-07 or 2020-12)`;
}

const compiled = new Map<string, ValidateFunction | string[]>();

/** The compiled validator of a schema, or the problems that keep it from compiling. */
function compile(s: unknown): ValidateFunction | string[] {
  if (typeof s !== 'object' || s === null || Array.isArray(s)) return ['$: not an object'];
  const key = JSON.stringify(s);
  const hit = compiled.get(key);
  if (hit) {
    compiled.delete(key); // most recently used last
    compiled.set(key, hit);
    return hit;
  }
  const made = compileNew(s as Record<string, unknown>);
  compiled.set(key, made);
  if (compiled.size > JSON_SCHEMA_CACHE_MAX) compiled.delete(compiled.keys().next().value!);
  return made;
}

function compileNew(s: Record<string, unknown>): ValidateFunction | string[] {
  const ajv = dialectOf(s);
  if (typeof ajv === 'string') return [`$: ${ajv}`];
  if (!ajv.validateSchema(s)) return (ajv.errors ?? []).map((e) => `$${e.instancePath.replaceAll('/', '.')}: ${e.message ?? 'invalid'}`);
  try {
    // A copy: the cache is keyed by text, and Ajv keeps its own reference to the object.
    const copy = structuredClone(s);
    const fn = ajv.compile(copy);
    ajv.removeSchema(copy); // the compiled function stands alone; Ajv's own cache would only grow
    return fn;
  } catch (err) {
    return [`$: ${err instanceof Error ? err.message : String(err)}`];
  }
}

/** Problems with a schema itself (not a valid draft-07 / 2020-12 schema, unresolvable `$ref`); empty when usable. */
export function schemaProblems(s: unknown): string[] {
  const c = compile(s);
  return Array.isArray(c) ? c : [];
}

const decode = (seg: string) => seg.replaceAll('~1', '/').replaceAll('~0', '~');
const pathOf = (pointer: string): (string | number)[] =>
  pointer === '' ? [] : pointer.slice(1).split('/').map((seg) => (/^(0|[1-9]\d*)$/.test(seg) ? Number(seg) : decode(seg)));

function issueOf(e: ErrorObject): InputIssue {
  const path = pathOf(e.instancePath);
  if (e.keyword === 'required') return { path: [...path, (e.params as { missingProperty: string }).missingProperty], message: 'is required' };
  if (e.keyword === 'additionalProperties') return { path: [...path, (e.params as { additionalProperty: string }).additionalProperty], message: 'is not allowed' };
  if (e.keyword === 'unevaluatedProperties') return { path: [...path, (e.params as { unevaluatedProperty: string }).unevaluatedProperty], message: 'is not allowed' };
  if (e.keyword === 'pattern' && patternInputTooLong(e.data)) return { path, message: PATTERN_INPUT_TOO_LONG };
  return { path, message: e.message ?? `fails ${e.keyword}` };
}

/** Issues of a value against a schema; empty when it conforms. A schema that cannot be compiled is one issue at the root. */
export function validate(schema: JsonSchema, value: unknown): InputIssue[] {
  const fn = compile(schema);
  if (Array.isArray(fn)) return [{ path: [], message: `the input schema is unusable: ${fn.join('; ')}` }];
  if (fn(value)) return [];
  // Combinators report each branch's failures and then their own: keep one issue per path and message.
  // Listed in the order of their paths, whatever order the keywords ran in.
  const seen = new Set<string>();
  const issues = (fn.errors ?? []).map(issueOf).filter((i) => {
    const k = JSON.stringify(i);
    return seen.has(k) ? false : (seen.add(k), true);
  });
  const where = (i: InputIssue) => JSON.stringify(i.path);
  return issues.sort((a, b) => (where(a) < where(b) ? -1 : where(a) > where(b) ? 1 : 0));
}
