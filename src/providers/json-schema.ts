// A validator for the small subset of JSON Schema the provider catalog uses for
// tool inputs: object/string/integer/number/boolean/array, properties,
// required, additionalProperties false, enum, minimum/maximum,
// minLength/maxLength, items. The catalog loader refuses a schema outside the
// subset, so every tool input schema is one this validator understands fully.

export type JsonSchema = {
  type: 'object' | 'string' | 'integer' | 'number' | 'boolean' | 'array';
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean;
  enum?: (string | number)[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  items?: JsonSchema;
  description?: string;
};

const KEYS = new Set(['type', 'properties', 'required', 'additionalProperties', 'enum', 'minimum', 'maximum', 'minLength', 'maxLength', 'items', 'description']);
const TYPES = new Set(['object', 'string', 'integer', 'number', 'boolean', 'array']);

/** Problems with a schema itself (outside the subset); empty when usable. */
export function schemaProblems(s: unknown, at = '$'): string[] {
  if (typeof s !== 'object' || s === null || Array.isArray(s)) return [`${at}: not an object`];
  const o = s as Record<string, unknown>;
  const out: string[] = [];
  for (const k of Object.keys(o)) if (!KEYS.has(k)) out.push(`${at}: keyword ${k} is outside the supported subset`);
  if (!TYPES.has(o.type as string)) out.push(`${at}: type must be one of ${[...TYPES].join(', ')}`);
  if (o.properties !== undefined) {
    if (typeof o.properties !== 'object' || o.properties === null) out.push(`${at}.properties: not an object`);
    else for (const [k, v] of Object.entries(o.properties)) out.push(...schemaProblems(v, `${at}.properties.${k}`));
  }
  if (o.items !== undefined) out.push(...schemaProblems(o.items, `${at}.items`));
  if (o.required !== undefined && (!Array.isArray(o.required) || o.required.some((r) => typeof r !== 'string' || !(o.properties && r in (o.properties as object))))) out.push(`${at}.required: names an undeclared property`);
  return out;
}

export type InputIssue = { path: (string | number)[]; message: string };

/** Issues of a value against a schema; empty when it conforms. */
export function validate(schema: JsonSchema, value: unknown, path: (string | number)[] = []): InputIssue[] {
  const issue = (message: string): InputIssue[] => [{ path, message }];
  if (schema.enum && !schema.enum.includes(value as string | number)) return issue(`must be one of ${schema.enum.join(', ')}`);
  switch (schema.type) {
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return issue('must be an object');
      const v = value as Record<string, unknown>;
      const out: InputIssue[] = [];
      for (const r of schema.required ?? []) if (!(r in v)) out.push({ path: [...path, r], message: 'is required' });
      for (const [k, item] of Object.entries(v)) {
        const ps = schema.properties?.[k];
        if (ps) out.push(...validate(ps, item, [...path, k]));
        else if (schema.additionalProperties === false) out.push({ path: [...path, k], message: 'is not allowed' });
      }
      return out;
    }
    case 'string':
      if (typeof value !== 'string') return issue('must be a string');
      if (schema.minLength !== undefined && value.length < schema.minLength) return issue(`must have at least ${schema.minLength} characters`);
      if (schema.maxLength !== undefined && value.length > schema.maxLength) return issue(`must have at most ${schema.maxLength} characters`);
      return [];
    case 'integer':
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value) || (schema.type === 'integer' && !Number.isSafeInteger(value))) return issue(`must be ${schema.type === 'integer' ? 'an integer' : 'a number'}`);
      if (schema.minimum !== undefined && value < schema.minimum) return issue(`must be at least ${schema.minimum}`);
      if (schema.maximum !== undefined && value > schema.maximum) return issue(`must be at most ${schema.maximum}`);
      return [];
    case 'boolean':
      return typeof value === 'boolean' ? [] : issue('must be a boolean');
    case 'array':
      if (!Array.isArray(value)) return issue('must be an array');
      return schema.items ? value.flatMap((item, i) => validate(schema.items!, item, [...path, i])) : [];
  }
}
