import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { testApp } from '../helpers/app.ts';
import { root } from '../helpers/service.ts';

// The served document passes Redocly's linter with its recommended rules (a
// kept linter, run on the document written to a temporary file), and teaches:
// every schema property has a description, every operation a summary, a
// description and examples of its request and its answers.

const { app } = await testApp(t);
const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as Doc;
type Json = Record<string, unknown>;
type Op = { operationId: string; summary?: string; description?: string; requestBody?: { content: Record<string, Json> }; responses: Record<string, { content?: Record<string, Json> }> };
type Doc = { paths: Record<string, Record<string, Op>>; components: { schemas: Record<string, Json> } };


const dir = await mkdtemp(path.join(os.tmpdir(), 'openapi-lint-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
if (process.env.OPENAPI_DUMP) await writeFile(process.env.OPENAPI_DUMP, JSON.stringify(doc, null, 2));

t.test('npx redocly lint (recommended rules) passes on the served document', async (t) => {
  const file = path.join(dir, 'openapi.json');
  await writeFile(file, JSON.stringify(doc));
  const bin = path.join(root, 'node_modules', '.bin', 'redocly');
  const { code, out } = await new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(bin, ['lint', file, '--extends=recommended', '--format=stylish'], { cwd: dir, env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' } });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('close', (code) => resolve({ code, out }));
  });
  t.equal(code, 0, `redocly lint:\n${out.slice(-6000)}`);
});

/** Every property of a schema, with where it is, that has no description. */
function undescribed(schema: unknown, at: string, out: string[]): void {
  if (Array.isArray(schema)) return schema.forEach((s, i) => undescribed(s, `${at}[${i}]`, out));
  if (!schema || typeof schema !== 'object') return;
  const s = schema as Json;
  if (s.properties && typeof s.properties === 'object') {
    for (const [name, p] of Object.entries(s.properties as Record<string, Json>)) {
      if (typeof p.description !== 'string' && typeof p.$ref !== 'string') out.push(`${at}.${name}`);
    }
  }
  for (const [k, v] of Object.entries(s)) if (k !== 'example' && k !== 'examples') undescribed(v, `${at}.${k}`, out);
}

t.test('every schema property is described', async (t) => {
  const missing: string[] = [];
  undescribed(doc.paths, 'paths', missing);
  undescribed(doc.components.schemas, 'components.schemas', missing);
  // A field whose name means the same everywhere: src/http/kernel/openapi-fields.ts; else `.describe()` in its zod schema.
  t.same(missing, [], 'every property says what it means');
});

t.test('every recorded example still matches its operation (contracts/examples is current)', async (t) => {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  ajv.addSchema(doc as unknown as Json, 'doc');
  const esc = (p: string) => p.replace(/~/g, '~0').replace(/\//g, '~1');
  const stale: string[] = [];
  let checked = 0;
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const at = ['paths', p, method];
      const places: [string[], Json | undefined][] = [[[...at, 'requestBody', 'content', 'application/json'], op.requestBody?.content['application/json']]];
      for (const [status, r] of Object.entries(op.responses)) places.push([[...at, 'responses', status, 'content', 'application/json'], r.content?.['application/json']]);
      for (const [pointer, media] of places) {
        const example = (media?.examples as { recorded?: { value: unknown } } | undefined)?.recorded?.value;
        if (example === undefined) continue;
        checked++;
        const validate = ajv.compile({ $ref: `doc#/${[...pointer, 'schema'].map(esc).join('/')}` });
        if (!validate(example)) stale.push(`${op.operationId} ${pointer.slice(3).join(' ')}: ${ajv.errorsText(validate.errors)}`);
      }
    }
  }
  t.ok(checked > 0, `${checked} examples checked`);
  t.same(stale, [], 'every example matches its schema (re-record with CONTRACT_RECORD when an operation changes)');
});

t.test('every operation has a summary, a description and examples', async (t) => {
  const lacking: string[] = [];
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const name = `${method.toUpperCase()} ${p}`;
      if (!op.summary) lacking.push(`${name}: summary`);
      if (!op.description) lacking.push(`${name}: description`);
      const json = op.requestBody?.content['application/json'];
      if (json && json.example === undefined && json.examples === undefined) lacking.push(`${name}: request example`);
      // One real answer among its successes (an operation answering 200 or 201 shows the one recorded).
      const successes = Object.entries(op.responses).filter(([s]) => s.startsWith('2') && op.responses[s]!.content?.['application/json']);
      const shown = successes.some(([, r]) => r.content!['application/json']!.example !== undefined || r.content!['application/json']!.examples !== undefined);
      if (successes.length > 0 && !shown) lacking.push(`${name}: ${successes.map(([s]) => s).join('/')} example`);
    }
  }
  t.same(lacking.filter((l) => !/example$/.test(l)), [], 'every operation has a summary and a description');
  // Every operation shows a real request and answer, recorded from the tests (CONTRACT_RECORD, docs/decisions.md).
  t.same(lacking.filter((l) => /example$/.test(l)), [], 'every operation has its examples');
});
