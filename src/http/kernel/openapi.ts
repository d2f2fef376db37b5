import { z } from 'zod';
import { businessEventTypes as eventTypes } from '../../../events/index.ts';
import type { RouteSpec } from './route.ts';
import { ErrorEnvelope } from './schemas.ts';
import { ERROR_SHAPES, errorResponses } from './openapi-errors.ts';
import { examples } from './openapi-examples.ts';
import { FIELD_DESCRIPTIONS } from './openapi-fields.ts';
import { INTRODUCTION, PRODUCT, TAG_DISPLAY, TAG_GROUPS } from './openapi-guide.ts';

// The OpenAPI 3.1 document, generated from the route declarations themselves:
// every operation with its security, parameters, body, responses and error codes.

type Json = Record<string, unknown>;

/** Named schemas (zod `.meta({id})`) collected for components.schemas. */
const shared: Record<string, Json> = {};

function relink(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(relink);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v as Json).map(([k, x]) => [k, k === '$ref' && typeof x === 'string' ? x.replace('#/$defs/', '#/components/schemas/') : relink(x)]),
    );
  }
  return v;
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json {
  return z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any', reused: 'inline' }) as Json;
}

/** Drops $schema, moves $defs into the shared components, points refs there. */
function strip(s: Json): Json {
  const { $schema: _s, $defs, ...rest } = s;
  for (const [name, def] of Object.entries(($defs ?? {}) as Record<string, Json>)) shared[name] = relink(def) as Json;
  if (typeof rest.id === 'string' && shared[rest.id] === undefined) {
    const { id, ...body } = rest;
    shared[id as string] = relink(body) as Json;
    return { $ref: `#/components/schemas/${id as string}` };
  }
  return relink(rest) as Json;
}

function stripId(s: Json): Json {
  if (typeof s.$ref === 'string') return shared[s.$ref.split('/').pop()!] ?? s;
  return s;
}

const SECURITY: Record<string, Json[]> = {
  open: [],
  api_key: [{ apiKey: [] }],
  platform: [{ platformSecret: [] }],
  service: [{ platformSecret: [], actingUser: [] }],
  human_session: [{ platformSecret: [], actingUser: [] }],
  org_admin: [{ apiKey: [] }, { platformSecret: [], actingUser: [] }],
  key_or_service: [{ apiKey: [] }, { platformSecret: [], actingUser: [] }],
};

/**
 * An operation that answers HTML pages to a person's browser and is registered
 * by its own module (its own refusals, a form body), not through defineRoute:
 * declared so the document lists it like every implemented operation. No
 * credential (security: []).
 */
export type PageSpec = {
  method: 'GET' | 'POST';
  url: string;
  operationId: string;
  summary: string;
  tags: string[];
  query?: z.ZodType;
  /** The form the page posts (application/x-www-form-urlencoded). */
  form?: z.ZodType;
  /** By status: what answers; `html` for a page (text/html), `headers` worth naming. */
  responses: Record<number, { description: string; html?: boolean; headers?: Record<string, string> }>;
};

function pageOperation(p: PageSpec): Json {
  const query = p.query ? strip(jsonSchema(p.query, 'input')) : undefined;
  const required = new Set((query?.required as string[] | undefined) ?? []);
  const parameters = Object.entries((query?.properties ?? {}) as Record<string, Json>).map(([name, schema]) => ({ name, in: 'query', required: required.has(name), schema }));
  const responses = Object.fromEntries(
    Object.entries(p.responses).map(([status, r]) => [
      status,
      {
        description: r.description,
        ...(r.html ? { content: { 'text/html': { schema: { type: 'string' } } } } : {}),
        ...(r.headers ? { headers: Object.fromEntries(Object.entries(r.headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }])) } : {}),
      },
    ]),
  );
  return {
    operationId: p.operationId,
    summary: p.summary,
    description: "An HTML page for a person's browser, not for an API client. **Credential:** none.",
    tags: p.tags,
    security: [],
    parameters,
    ...(p.form ? { requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: strip(jsonSchema(p.form, 'input')) } } } } : {}),
    responses,
  };
}

/** The exception shapes some operation answers in (an unused component is noise in the reference). */
function usedShapes(paths: Json): Json {
  const text = JSON.stringify(paths);
  return Object.fromEntries(Object.entries(ERROR_SHAPES).filter(([name]) => text.includes(`"#/components/schemas/${name}"`)));
}

const CREDENTIAL: Record<string, string> = {
  open: 'No credential.',
  api_key: 'An API key (`Authorization: Bearer sk_…`), or an OAuth access token acting as one',
  platform: 'The platform secret.',
  service: 'The platform secret with the acting user in `x-svc-user`.',
  human_session: 'The platform secret with the acting user in `x-svc-user` (a person, not an agent).',
  org_admin: 'An API key, or the platform secret with an admin in `x-svc-user`.',
  key_or_service: 'An API key, or the platform secret with the acting user in `x-svc-user`.',
};

/** What the operation takes, said once for readers: its credential, scope and role, and whether a repeat is safe. */
function access(r: RouteSpec): string {
  const who = CREDENTIAL[r.auth] ?? '';
  const parts = [`**Credential:** ${who}${r.auth === 'api_key' ? (r.scope ? ` with the scope \`${r.scope}\`.` : '.') : ''}`];
  if (r.actingUser && r.auth === 'api_key') parts.push('An admin of the organization named in `x-svc-user` beside the key.');
  if (r.minRole) parts.push(`**Role:** at least \`${r.minRole}\`.`);
  if (r.idempotent) parts.push('**Idempotent:** send an `Idempotency-Key` to repeat it safely.');
  if (r.deprecated) parts.push('**Deprecated:** kept with its shapes; prefer the replacement named in the summary.');
  return parts.join(' ');
}

/** A recorded example (contracts/examples), as a named example: the reference shows it in place of one made from the schema. */
const recorded = (value: unknown): Json => ({ recorded: { summary: 'Recorded from the test suite', value } });

/** Gives every property without a description of its own the shared one of its name (src/http/kernel/openapi-fields.ts). */
function describeFields(s: unknown): void {
  if (Array.isArray(s)) return s.forEach(describeFields);
  if (!s || typeof s !== 'object') return;
  const props = (s as Json).properties as Record<string, Json> | undefined;
  if (props && typeof props === 'object') {
    for (const [name, p] of Object.entries(props)) {
      if (p && typeof p === 'object' && p.description === undefined && p.$ref === undefined && FIELD_DESCRIPTIONS[name]) p.description = FIELD_DESCRIPTIONS[name];
    }
  }
  for (const [k, v] of Object.entries(s as Json)) if (k !== 'example' && k !== 'examples') describeFields(v);
}

export function buildOpenApi(routes: readonly RouteSpec[], serverUrl: string, pages: readonly PageSpec[] = []): Json {
  const doc = buildDocument(routes, serverUrl, pages);
  describeFields(doc.paths);
  describeFields((doc.components as Json).schemas);
  return doc;
}

function buildDocument(routes: readonly RouteSpec[], serverUrl: string, pages: readonly PageSpec[]): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const p of pages) (paths[p.url] ??= {})[p.method.toLowerCase()] = pageOperation(p);
  for (const r of routes) {
    const path = r.url.replace(/:([A-Za-z_]+)/g, '{$1}');
    const parameters: Json[] = [];
    const addParams = (schema: z.ZodType | undefined, where: 'path' | 'query') => {
      if (!schema) return;
      const js = strip(jsonSchema(schema, 'input'));
      const props = (js.properties ?? {}) as Record<string, Json>;
      const required = new Set((js.required as string[] | undefined) ?? []);
      for (const [name, s] of Object.entries(props)) parameters.push({ name, in: where, required: where === 'path' || required.has(name), schema: s });
    };
    addParams(r.params, 'path');
    addParams(r.query, 'query');
    if (r.auth === 'api_key') parameters.push({ name: 'x-svc-project', in: 'header', required: false, schema: { type: 'string' }, description: 'Project to act in; the default project when omitted.' });
    if (r.idempotent) parameters.push({ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: 255 }, description: 'Repeat-safe key: a repeat with the same body returns the first response.' });
    const responses: Record<string, Json> = {};
    for (const [status, schema] of Object.entries(r.responses)) {
      responses[status] = schema ? { description: 'Success', content: { 'application/json': { schema: strip(jsonSchema(schema, 'output')) } } } : { description: 'Success, no body' };
      const headers = r.responseHeaders?.[Number(status)];
      if (headers) responses[status]!.headers = Object.fromEntries(Object.entries(headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }]));
    }
    // A route that also streams: its events under text/event-stream beside the JSON answer.
    if (r.sse) (((responses['200'] ??= { description: 'Success' }) as Json).content ??= {} as Json)['text/event-stream' as never] = { schema: strip(jsonSchema(r.sse, 'output')) } as never;
    // A status the route declares a body for keeps that body (the x402 402, OAuth's error object); the codes name it.
    for (const [status, documented] of Object.entries(errorResponses(r))) {
      const declared = responses[status] as Json | undefined;
      responses[status] = declared?.content ? { ...declared, description: documented.description } : documented;
    }
    const op: Json = {
      operationId: r.operationId,
      summary: r.summary,
      description: [r.description, access(r)].filter(Boolean).join('\n\n'),
      tags: r.tags,
      // An API key route that also needs a person (an admin in x-svc-user): both, together.
      security: r.actingUser && r.auth === 'api_key' ? [{ apiKey: [], actingUser: [] }] : SECURITY[r.auth],
      parameters,
      responses,
      ...(r.deprecated ? { deprecated: true } : {}),
      'x-error-codes': (r.errors ?? []).map(([status, code]) => ({ status, code })),
      ...(r.scope ? { 'x-scope': r.scope } : {}),
    };
    const example = examples().get(r.operationId);
    if (r.body) {
      op.requestBody = { required: !r.bodyOptional, content: { 'application/json': { schema: strip(jsonSchema(r.body, 'input')), ...(example?.request !== undefined ? { examples: recorded(example.request) } : {}) } } };
    }
    const answered = example?.response !== undefined && (responses[String(example.status)]?.content as Json | undefined)?.['application/json'];
    if (answered) (answered as Json).examples = recorded(example.response);
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: PRODUCT, version: '1.0.0', description: INTRODUCTION },
    servers: [{ url: serverUrl, description: 'This service' }],
    tags: TAG_GROUPS.flatMap((g) => g.tags.map(([name, description]) => ({ name, description, 'x-displayName': TAG_DISPLAY[name] ?? name[0]!.toUpperCase() + name.slice(1).replace(/-/g, ' ') }))),
    'x-tagGroups': TAG_GROUPS.map((g) => ({ name: g.name, tags: g.tags.map(([name]) => name) })),
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: sk_test_... or sk_live_...' },
        platformSecret: { type: 'http', scheme: 'bearer', description: 'The platform secret of the service-auth subtree.' },
        actingUser: { type: 'apiKey', in: 'header', name: 'x-svc-user', description: 'The acting user.' },
      },
      schemas: { ...shared, ErrorEnvelope: stripId(strip(jsonSchema(ErrorEnvelope, 'output'))), ...usedShapes(paths) },
    },
    'x-event-types': eventTypes,
  };
}
