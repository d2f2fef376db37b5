// PostgreSQL array literals for parameters (`$1::text[]`, `$2::boolean[]`, ...):
// a set of rows can travel as one array per column and be read back by
// unnest(), which PostgreSQL parses faster than the same rows as a JSON
// document, as long as encoding the arrays costs the client no more.

/**
 * The array literal of strings, booleans and nulls, exactly: an element reads
 * back as the same string (or boolean, or NULL).
 *
 * One native JSON encoding serves when it says nothing an array literal would
 * read differently: both quote strings and escape `"` and `\` with a
 * backslash, and `null`, `true`, `false` unquoted mean NULL and the booleans in
 * both. JSON alone escapes control characters and lone surrogates (`\n`,
 * `\u0001`, ...), which an array literal would read as other characters; when
 * the JSON text has any backslash escape other than `\"` and `\\`, each string
 * is quoted by hand instead (inside quotes an array literal takes every other
 * character as it is).
 */
export function arrayLiteral(values: readonly (string | boolean | null)[]): string {
  const json = JSON.stringify(values);
  if (!/\\[^"\\]/.test(json.replace(/\\\\/g, ''))) return `{${json.slice(1, -1)}}`;
  return `{${values.map((v) => (v === null ? 'NULL' : typeof v === 'boolean' ? String(v) : `"${v.replace(/["\\]/g, '\\$&')}"`)).join(',')}}`;
}
