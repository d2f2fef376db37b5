import t from 'tap';
import { schemaProblems, validate } from '../../src/providers/json-schema.ts';
import { JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS } from '../../src/limits.ts';

// Schema patterns (a registered upstream's tool schema is outside input) run
// on a linear-time engine (issue 61 item 5): a catastrophic pattern against
// its worst input returns at once instead of backtracking for ages; a string
// past the bound fails the pattern saying so; a pattern the engine cannot run
// in linear time (lookaround, backreference) makes the schema unusable.

t.test('a catastrophic pattern against its worst input returns, with the issue', async (t) => {
  for (const pattern of ['^(a+)+$', '^(a|a)*$', '^(a|aa)+$', '^([a-z]+)*[0-9]$']) {
    const schema = { type: 'object', properties: { v: { type: 'string', pattern } } };
    t.same(schemaProblems(schema), [], `${pattern} compiles`);
    t.same(validate(schema, { v: `${'a'.repeat(50)}!` }), [{ path: ['v'], message: `must match pattern "${pattern}"` }], pattern);
  }
  const schema = { type: 'object', properties: { v: { type: 'string', pattern: '^(a+)+$' } } };
  t.same(validate(schema, { v: 'a'.repeat(10_000) }), [], 'a matching input still matches');
});

t.test('patterns keep ECMA-262 meaning for what RE2 shares: search semantics, classes, unicode, patternProperties', async (t) => {
  const schema = {
    type: 'object',
    properties: { id: { type: 'string', pattern: 'ch_[0-9a-z]+' }, name: { type: 'string', pattern: '^\\p{L}+$' }, code: { type: 'string', pattern: '^\\d{3}-\\w+$' } },
    patternProperties: { '^x-': { type: 'number' } },
  };
  t.same(validate(schema, { id: 'the ch_9z one', name: 'Conceição', code: '123-ab_c', 'x-n': 1 }), [], 'unanchored search, \\p{L}, \\d and \\w as in JavaScript');
  t.same(validate(schema, { id: 'nope', name: 'Ana1', code: '12-a', 'x-n': 'one' }).map((i) => i.path.join('.')), ['code', 'id', 'name', 'x-n']);
  t.same(validate({ type: 'object', properties: { s: { type: 'string', pattern: '^[a-f]+$' } } }, { s: 'abc\ndef' }).length, 1, '$ is the end of the input, not of a line');
});

t.test('a string past the bound fails its pattern, saying why', async (t) => {
  const schema = { type: 'object', properties: { v: { type: 'string', pattern: 'a' } } };
  t.same(validate(schema, { v: 'a'.repeat(JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS) }), [], 'at the bound: matched');
  t.same(validate(schema, { v: 'a'.repeat(JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS + 1) }), [{ path: ['v'], message: `is longer than ${JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS} characters, the most a pattern is checked against` }]);
});

t.test('a pattern only a backtracking engine runs makes the schema unusable, naming the pattern', async (t) => {
  for (const pattern of ['^(?=a)a$', '^(a)\\1$']) {
    const problems = schemaProblems({ type: 'object', properties: { v: { type: 'string', pattern } } });
    t.equal(problems.length, 1, pattern);
    t.match(problems[0], `pattern ${JSON.stringify(pattern)} is not supported`);
    t.match(validate({ type: 'object', properties: { v: { type: 'string', pattern } } }, { v: 'a' }), [{ path: [], message: /the input schema is unusable/ }]);
  }
});
