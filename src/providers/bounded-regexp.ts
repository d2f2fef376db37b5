import type { RegExpEngine } from 'ajv/dist/types/index.js';
import { RE2JS } from 're2js';
import { JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS } from '../limits.ts';

// The regular-expression engine Ajv compiles schema patterns with (its
// `code.regExp` option): RE2 (re2js, pure JavaScript), which matches in time
// linear in the input whatever the pattern, so a registered upstream's
// `pattern` cannot stall the process on a hostile input (ReDoS). RE2 has no
// lookaround and no backreference: a schema using them does not compile and
// is refused as unusable. A string longer than
// JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS fails the pattern without being matched.

/** The issue of a string too long to be matched. */
export const PATTERN_INPUT_TOO_LONG = `is longer than ${JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS} characters, the most a pattern is checked against`;
export const patternInputTooLong = (data: unknown) => typeof data === 'string' && data.length > JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS;

/** Ajv's RegExpEngine over RE2: `u` (Ajv's unicodeRegExp) is RE2's default; anything else is refused. */
export const boundedRegExp: RegExpEngine = Object.assign(
  (pattern: string, flags: string) => {
    if (flags !== '' && flags !== 'u') throw new Error(`pattern flags ${flags} are not supported`);
    let re: RE2JS;
    try {
      re = RE2JS.compile(RE2JS.translateRegExp(pattern));
    } catch (err) {
      // The message Ajv's caller shows: which pattern, and why RE2 refuses it.
      throw new Error(`pattern ${JSON.stringify(pattern)} is not supported (linear-time engine, no lookaround or backreference): ${err instanceof Error ? err.message : String(err)}`);
    }
    return {
      test: (s: string) => !patternInputTooLong(s) && re.test(s),
      // Ajv keys compiled patterns by this text: it must name the pattern.
      toString: () => `/${pattern}/${flags}`,
    };
  },
  { code: 'boundedRegExp' },
);
