import fc from 'fast-check';
import t from 'tap';
import { bootstrapOrg, platform, testApp } from '../helpers/app.ts';

// Random and malformed JSON, queries, headers and path ids thrown at every
// route: never an undocumented 5xx (never a 500), always a JSON body in the
// documented shapes, always an X-Request-Id.

const { app } = await testApp(t);
const org = await bootstrapOrg(app, 'Fuzz');
const routes = app.routeSpecs;
const RUNS = Number(process.env.FUZZ_RUNS ?? '25');

const segment = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('', '%00', '%', '..', 'prj_', `${'a'.repeat(300)}`, '%E2%82%AC', '0x7f', '-1', 'null'),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
);
const query = fc.dictionary(fc.constantFrom('limit', 'offset', 'is_default', 'status', 'x', 'limit[]'), fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('-1', '0', '1e9', 'true', 'NaN', '')), { maxKeys: 4 });
const body = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => ({ kind: 'json' as const, text: JSON.stringify(v) })),
  fc.string({ maxLength: 60 }).map((s) => ({ kind: 'raw' as const, text: s })),
  fc.constant({ kind: 'none' as const, text: '' }),
);
const contentType = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'application/problem+json', '');
const credential = fc.constantFrom<Record<string, string>>({}, org.key, org.owner, platform, { authorization: 'Bearer' }, { authorization: `Bearer ${org.testKey}x` }, { ...org.key, 'x-svc-project': '%%%' }, { ...platform, 'x-svc-user': '\u0000' });

function documentedShape(status: number, json: unknown): boolean {
  if (typeof json !== 'object' || json === null) return false;
  const o = json as Record<string, unknown>;
  if (status < 400) return true;
  if (typeof o.error === 'string') return true; // the listed exceptions: unauthorized, forbidden, insufficient_role, rate_limited...
  const e = o.error as Record<string, unknown> | undefined;
  return !!e && typeof e.code === 'string' && typeof e.message === 'string' && typeof o.request_id === 'string';
}

for (const route of routes) {
  t.test(`${route.method} ${route.url}`, async (t) => {
    await fc.assert(
      fc.asyncProperty(fc.array(segment, { minLength: 2, maxLength: 2 }), query, body, contentType, credential, async (segs, q, b, ct, cred) => {
        let i = 0;
        const path = route.url.replace(/:([A-Za-z_]+)/g, () => encodeURIComponent(segs[i++ % segs.length]!));
        const qs = new URLSearchParams(q).toString();
        const headers: Record<string, string> = { ...cred };
        if (ct) headers['content-type'] = ct;
        // As a stream: a request a server-sent-events route accepts stays open for as long as the client listens.
        const answer = await app.inject({ method: route.method, url: qs ? `${path}?${qs}` : path, headers, payloadAsStream: true, ...(b.kind !== 'none' && route.method !== 'GET' ? { payload: b.text } : {}) });
        if (String(answer.headers['content-type']).startsWith('text/event-stream')) {
          // An accepted stream: its status and request id are what is checked; the client hangs up.
          answer.stream().destroy();
          // The hang-up as the server sees it on a socket (inject has none): the response closes, the route stops streaming.
          answer.raw.res.emit('close');
          if (answer.statusCode !== 200) throw new Error(`an event stream with status ${answer.statusCode}`);
          if (!answer.headers['x-request-id']) throw new Error('no X-Request-Id');
          return;
        }
        const chunks: Buffer[] = [];
        for await (const c of answer.stream()) chunks.push(Buffer.from(c as Uint8Array));
        const text = Buffer.concat(chunks).toString('utf8');
        const res = { statusCode: answer.statusCode, headers: answer.headers, body: text, json: () => JSON.parse(text) as unknown };
        // A 5xx only where the route documents it (501 not wired, 502 upstream, 503 unavailable), never a 500.
        const documented5xx = (route.errors ?? []).some(([status]) => status === res.statusCode) && res.statusCode !== 500;
        if (res.statusCode >= 500 && !documented5xx) throw new Error(`${res.statusCode} for ${route.method} ${path}: ${res.body}`);
        if (!res.headers['x-request-id']) throw new Error('no X-Request-Id');
        if (String(res.headers['content-type']).startsWith('application/x-ndjson')) {
          for (const line of res.body.trim().split('\n')) JSON.parse(line);
        } else if (res.statusCode >= 300 && res.statusCode < 400) {
          // A path that normalizes to `/` ('/mcp/..') reaches the dashboard's redirect: a Location, no body.
          if (!res.headers.location) throw new Error(`a ${res.statusCode} without Location for ${route.method} ${path}`);
        } else if (res.statusCode !== 204) {
          let json: unknown;
          try {
            json = res.json();
          } catch {
            throw new Error(`not JSON: ${res.body.slice(0, 200)}`);
          }
          if (!documentedShape(res.statusCode, json)) throw new Error(`undocumented shape ${res.statusCode}: ${res.body.slice(0, 200)}`);
        }
      }),
      { numRuns: RUNS },
    );
    t.pass('no 5xx, documented shapes');
  });
}
