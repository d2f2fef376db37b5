import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { z } from 'zod';

// Reading an event checks its data against its schema (a projection, a fold,
// a rebuild must stop on a malformed event rather than project a wrong row).
// zod's parse does that by building a copy of the data; for data that is
// already exactly in its schema's shape (what the write side appended), the
// copy equals the data. This module answers "exactly in shape" without a
// copy: each type's zod schema as JSON Schema in its output form (every
// object closed: no member the schema does not name), compiled by Ajv once.
// Data that passes is returned as it is; anything else goes to zod, which
// refuses it with its message or returns the copy without the extra members.
// Ajv's options keep it no more lenient than zod: patterns as JavaScript
// regular expressions without the `u` flag (as zod runs them), NaN and
// Infinity refused (zod refuses them; JSON cannot carry them, but a decider's
// object can), no format keyword (zod's own pattern rides along with it); a
// schema with an upper bound on a string's length is left to zod alone (Ajv
// counts code points, zod UTF-16 units).

const ajv = new Ajv2020({ strict: false, strictNumbers: true, unicodeRegExp: false, validateFormats: false, allErrors: false, addUsedSchema: false });

const compiled = new Map<string, ValidateFunction | null>();

/** A validator of data exactly in the schema's output shape, or null when the schema has no JSON Schema form (then zod alone decides). */
function validatorOf(type: string, schema: z.ZodType): ValidateFunction | null {
  let v = compiled.get(type);
  if (v !== undefined) return v;
  try {
    const json = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'throw' });
    // Ajv measures a string in code points, zod in UTF-16 units: for an upper bound Ajv would be the more lenient.
    v = JSON.stringify(json).includes('"maxLength"') ? null : ajv.compile(json as object);
  } catch {
    v = null;
  }
  compiled.set(type, v);
  return v;
}

/**
 * True when `data` is exactly in the shape of `schema`'s output: zod would
 * accept it and answer an equal copy. False says nothing (zod must decide).
 */
export function inShape(type: string, schema: z.ZodType, data: unknown): boolean {
  const v = validatorOf(type, schema);
  return v !== null && v(data) === true;
}
