import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { proxyCallDecider, proxyCallStream } from '../../commands/session.ts';
import { ProviderError } from '../adapters/providers/http-provider.ts';
import type { ProviderDef } from '../providers/catalog.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { policyDenied, registerApprovalExecutor } from './approvals.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam } from './schemas.ts';
import { readSession, tenantOf } from './sessions.ts';
import { amountOf, type Run, type SessionRow, underPolicy } from './tool-exec.ts';

// POST /v1/sessions/{id}/proxy_execute {server, endpoint, method, params?,
// body?, headers?}: one request to a connected provider's own API, with the
// session end user's connection (the provider's authentication applied by
// the provider HTTP adapter: guarded outbound client, no redirects followed).
// The endpoint is a path joined to the provider's base URL from the catalog
// and may not leave it; only the caller's non-authorization headers pass.
// Policies apply as to a tool call, under the tool name
// `<server>/proxy_execute`. Each call is recorded (`proxy_call.started`, then
// `.completed` with the provider's status, or `.failed` when it was not
// reached) and sealed; the record holds the path, query, body and header
// names, never the credential, the full URL or header values. Answers
// {status, data, headers, duration, proxy_call_id} whatever the provider's
// status; 502 provider_error when the provider was not reached.

export const PROXY_TOOL = 'proxy_execute';
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** Headers a caller may not set: credentials, and what the transport owns. */
const DROPPED = new Set(['authorization', 'proxy-authorization', 'cookie', 'host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'expect', 'proxy-connection']);
/** Answer headers never handed back (cookies, the transport's own). */
const HIDDEN = new Set(['set-cookie', 'connection', 'keep-alive', 'transfer-encoding']);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;

const ProxyBody = z.object({
  server: z.string().min(1).max(64),
  endpoint: z.string().min(1).max(2000).meta({ description: "A path under the provider's base URL, starting with /; no scheme or host, no '..', no encoded slash, dot or percent, no query (use params)" }),
  method: z.enum(METHODS),
  params: z.record(z.string().max(200), z.union([z.string().max(4000), z.number(), z.boolean()])).optional().meta({ description: 'The query string' }),
  body: z.unknown().optional().meta({ description: 'Sent as JSON' }),
  headers: z.record(z.string(), z.string().max(4000)).optional().meta({ description: "The caller's headers; authorization, cookies and the provider's credential headers never pass" }),
});
type ProxyBody = z.infer<typeof ProxyBody>;

const ProxyResult = z
  .object({
    status: z.number().int().meta({ description: "The provider's HTTP status" }),
    data: z.unknown().meta({ description: "The provider's answer: JSON, else its text" }),
    headers: z.record(z.string(), z.string()),
    duration: z.number().int().meta({ description: 'milliseconds' }),
    proxy_call_id: z.string(),
  })
  .meta({ id: 'ProxyResult' });

const bad = (field: (string | number)[], message: string) => new ApiError(400, 'invalid_body', message, { issues: [{ path: field, code: 'invalid_value', message }] });

/** The endpoint's own rules; the joined URL is checked again against the base path before anything is sent. */
function checkEndpoint(endpoint: string): void {
  const no = (why: string) => bad(['endpoint'], `endpoint ${why}`);
  if (/^[a-z][a-z0-9+.-]*:/i.test(endpoint)) throw no('must be a path, not an absolute URL');
  if (!endpoint.startsWith('/') || endpoint.startsWith('//')) throw no('must be a path starting with a single /');
  if (endpoint.includes('..')) throw no("may not hold '..'");
  if (/%(2f|5c|2e|25)/i.test(endpoint)) throw no('may not hold an encoded slash, backslash, dot or percent');
  if (/[\\?#\s\x00-\x1f\x7f]/.test(endpoint)) throw no('may not hold a backslash, a query, a fragment, spaces or control characters');
}

/** The caller's headers that pass: checked names and values, credentials and transport headers dropped. */
function passedHeaders(p: ProviderDef, headers: Record<string, string> | undefined): Record<string, string> {
  const own = new Set(p.fields.map((f) => f.header_name).filter((h): h is string => h !== null));
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!TOKEN.test(name)) throw bad(['headers', name], 'a header name is an HTTP token');
    if (/[\r\n\x00]/.test(value)) throw bad(['headers', name], 'a header value holds no line breaks');
    const lower = name.toLowerCase();
    if (DROPPED.has(lower) || own.has(lower) || lower.startsWith(`x-${p.id}-`)) continue;
    out[lower] = value;
  }
  return out;
}

export async function proxyExecute(deps: AppDeps, run: Run, s: SessionRow, b: ProxyBody, approvedBy: string | null = null): Promise<z.infer<typeof ProxyResult>> {
  if (!s.servers.includes(b.server)) throw bad(['server'], `${b.server} is not attached to this session`);
  const p = deps.providers.runtime.catalog.get(b.server);
  if (!p) throw bad(['server'], `no provider ${b.server} in the catalog`);
  checkEndpoint(b.endpoint);
  const headers = passedHeaders(p, b.headers);
  const baseUrl = deps.providers.baseUrl(p, s.environment);
  if (baseUrl) {
    const base = new URL(baseUrl);
    const basePath = base.pathname.replace(/\/$/, '');
    const joined = new URL(`${base.origin}${basePath}${b.endpoint}`);
    if (joined.origin !== base.origin || !(joined.pathname === basePath || joined.pathname.startsWith(`${basePath}/`))) throw bad(['endpoint'], "endpoint leaves the provider's base path");
  }
  const tenant = { orgId: s.org_id, projectId: s.project_id };
  const cred = await deps.providers.credentialFor(p, tenant, s.user_id);
  if (!cred.ok) throw new ApiError(424, 'not_connected', cred.error.message, { server: p.id });

  const id = newId('pxc');
  const params = Object.fromEntries(Object.entries(b.params ?? {}).map(([k, v]) => [k, String(v)]));
  const opts = { orgId: tenant.orgId, projectId: tenant.projectId };
  const base = { proxy_call_id: id, session_id: s.id, server_id: p.id };
  const body = b.body === undefined || b.method === 'GET' || b.method === 'DELETE' ? undefined : b.body;
  const toolInput = { method: b.method, endpoint: b.endpoint, params, ...(body !== undefined ? { body } : {}), ...(b.headers ? { headers: b.headers } : {}) };
  const money = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const gate = await underPolicy(deps, run, s, { toolName: `${p.id}/${PROXY_TOOL}`, toolInput, amountMinor: amountOf(money), currency: typeof money.currency === 'string' ? money.currency : null, approvedBy }, (guard) =>
    run(proxyCallDecider, proxyCallStream(id), {
      type: 'start',
      data: { ...base, org_id: tenant.orgId, project_id: tenant.projectId, user_id: s.user_id, method: b.method, endpoint: b.endpoint, params, body: body ?? null, header_names: Object.keys(headers).sort(), called_at: deps.now().toISOString() },
    }, { ...opts, expectedRevision: 'no_stream', guard }),
  );
  if (!gate.ok) throw policyDenied(gate.denial);
  const started = Date.now();
  try {
    const r = await deps.providers.runtime.client.exchange(p, baseUrl, cred.credential, { method: b.method, path: b.endpoint, query: params, ...(body !== undefined ? { body } : {}), headers });
    const duration = Math.max(0, Date.now() - started);
    await run(proxyCallDecider, proxyCallStream(id), { type: 'complete', data: { ...base, status: r.status, data: r.json ?? null, duration_ms: duration, connection_id: cred.connectionId, at: deps.now().toISOString() } }, opts);
    if (r.status >= 400) await gate.release();
    const shown = Object.fromEntries(Object.entries(r.headers).filter(([k]) => !HIDDEN.has(k)));
    return { status: r.status, data: r.json ?? null, headers: shown, duration, proxy_call_id: id };
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    const duration = Math.max(0, Date.now() - started);
    await run(proxyCallDecider, proxyCallStream(id), { type: 'fail', data: { ...base, error_code: err.kind, error_message: err.message.slice(0, 500), duration_ms: duration, at: deps.now().toISOString() } }, opts);
    await gate.release();
    throw new ApiError(502, 'provider_error', err.message, { proxy_call_id: id, reason: err.kind, retriable: err.kind === 'unreachable' || err.kind === 'timeout' });
  }
}

export async function sessionProxyRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // An approved proxy call runs in its session with the held request, verbatim (one executor per catalog provider).
  for (const p of deps.providers.runtime.catalog.providers) {
    registerApprovalExecutor(`${p.id}/${PROXY_TOOL}`, async (a, deps, run) => {
      if (!a.session_id || !a.project_id) throw new ApiError(409, 'session_closed', 'the held call has no session');
      const s = await readSession(deps, { orgId: a.org_id, projectId: a.project_id }, a.session_id);
      if (!s || s.status !== 'active') throw new ApiError(409, 'session_closed', 'the session of the held call is closed');
      const held = ProxyBody.safeParse({ ...a.tool_input, server: p.id });
      if (!held.success) throw new ApiError(409, 'invalid_held_call', 'the held proxy call cannot be read');
      const r = await proxyExecute(deps, run, s, held.data, a.decided_by ?? 'approval');
      return { proxy_call_id: r.proxy_call_id, status: r.status, data: r.data as unknown, duration_ms: r.duration };
    });
  }
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/sessions/:id/proxy_execute',
    operationId: 'proxyExecuteSession',
    summary: "Call a connected provider's own API with the session end user's connection (a path under the provider's base URL); recorded (pxc_...) and sealed, policies applied as to a tool call (`<server>/proxy_execute`); answers the provider's status, data and headers",
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: z.object({ id: IdParam }),
    body: ProxyBody,
    responses: { 200: ProxyResult },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'policy_denied'], [404, 'not_found'], [409, 'session_closed'], [424, 'not_connected'], [502, 'provider_error']],
    async handler(ctx) {
      const tenant = await tenantOf(ctx as never);
      const s = await readSession(ctx.deps, tenant, ctx.params.id);
      if (!s) throw new ApiError(404, 'not_found', 'session not found');
      if (s.status !== 'active') throw new ApiError(409, 'session_closed', 'the session is closed');
      return { status: 200, body: await proxyExecute(ctx.deps, ctx.run.bind(ctx) as Run, s, ctx.body) };
    },
  });
}
