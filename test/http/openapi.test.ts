import SwaggerParser from '@apidevtools/swagger-parser';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { OPENAPI_DOC_ENV } from '../helpers/contract.ts';

// The served OpenAPI document passes an independent validator, and every route
// fastify registered appears in it with its security and error codes.

const { app } = await testApp(t);

t.test('valid OpenAPI 3.1 at both addresses', async (t) => {
  const root = await app.inject({ method: 'GET', url: '/openapi.json' });
  const v1 = await app.inject({ method: 'GET', url: '/v1/openapi.json' });
  t.equal(root.statusCode, 200);
  t.same(root.json(), v1.json(), 'the same document under /v1');
  const doc = root.json();
  t.equal(doc.openapi, '3.1.0');
  await SwaggerParser.validate(structuredClone(doc));
  t.pass('validated by @apidevtools/swagger-parser');
});

t.test('the document comes from the route declarations alone: the same text whatever the options an app is built with', async (t) => {
  // What lets a run check every app's answers against one document (test/helpers/contract.ts).
  const text = (await app.inject({ method: 'GET', url: '/openapi.json' })).body;
  const configured = await testApp(t, { x402: true, providers: true, merchants: true, oauth: {}, store: 'esdb' });
  t.equal((await configured.app.inject({ method: 'GET', url: '/openapi.json' })).body, text, 'an app with every adapter configured, on EventStoreDB');
  const run = process.env[OPENAPI_DOC_ENV];
  if (run) t.equal(readFileSync(run, 'utf8'), text, "the run's document (test/run.ts)");
});

t.test('every registered route is documented', async (t) => {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, { security: unknown[]; responses: Record<string, unknown>; operationId: string }>> };
  const undocumented = app.registeredRoutes
    // Not part of the API: the documents themselves, the reference page (/docs and its scripts), the Prometheus scrape, and the dashboard (pages for people, `/` leads there).
    .filter((r) => !['/openapi.json', '/v1/openapi.json', '/metrics', '/'].includes(r.url) && r.url !== '/docs' && !r.url.startsWith('/docs/') && r.url !== '/dashboard' && !r.url.startsWith('/dashboard/'))
    .filter((r) => !doc.paths[r.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[r.method.toLowerCase()]);
  t.same(undocumented, [], 'no route missing from the document');
  const ops = Object.values(doc.paths).flatMap((p) => Object.values(p));
  t.equal(new Set(ops.map((o) => o.operationId)).size, ops.length, 'operation ids are unique');
  const projects = doc.paths['/v1/projects']!.post!;
  t.same(projects.security, [{ apiKey: [] }]);
  t.match(projects.responses['400'], { description: /slug_invalid.*slug_reserved.*slug_conflict/ });
  t.ok(doc.paths['/v1/projects/{id}']!.get!.responses['404']);
});

t.test('the OAuth consent pages are documented, as HTML, with no credential (issue 40 item 6)', async (t) => {
  type HtmlOp = { security: unknown[]; parameters: { name: string; in: string; required: boolean }[]; requestBody?: { content: Record<string, unknown> }; responses: Record<string, { content?: Record<string, unknown>; headers?: Record<string, unknown> }> };
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, HtmlOp>> };
  const page = doc.paths['/oauth/authorize']?.get;
  const decide = doc.paths['/oauth/authorize']?.post;
  t.ok(page && decide, 'GET and POST /oauth/authorize are in the document');
  t.same(page!.security, [], 'the page takes no credential');
  t.same(decide!.security, []);
  t.ok(page!.responses['200']!.content!['text/html'], 'the consent page is text/html');
  t.ok(page!.responses['400']!.content!['text/html'], 'a refusal is an HTML page');
  t.same(
    page!.parameters.filter((p) => p.required).map((p) => `${p.in}:${p.name}`).sort(),
    ['query:client_id', 'query:code_challenge', 'query:code_challenge_method', 'query:redirect_uri', 'query:response_type'],
    'the required query parameters',
  );
  t.ok(decide!.requestBody!.content['application/x-www-form-urlencoded'], 'the form body');
  t.ok(decide!.responses['302']!.headers!.location, 'allow and deny redirect to the client');
  t.ok(decide!.responses['400']!.content!['text/html']);
});

t.test('every operation an API key can call names the scope it needs (deprecated paths too)', async (t) => {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, { security?: Record<string, unknown>[]; 'x-scope'?: string }>> };
  const unscoped = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([, op]) => op.security?.some((s) => 'apiKey' in s) && !op['x-scope'])
      .map(([method]) => `${method.toUpperCase()} ${path}`),
  );
  // whoami tells any key what it is.
  t.same(unscoped, ['GET /v1/whoami']);
});
