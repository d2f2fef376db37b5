import { z } from 'zod';
import { proxyCallDecider, proxyCallStream } from '../../commands/session.ts';
import { ProviderError } from '../adapters/providers/http-provider.ts';
import { Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import type { Catalog, ProviderDef } from '../providers/catalog.ts';
import type { ApprovalExecutor } from './approval-executors.ts';
import type { Ports, RunCommand } from './context.ts';
import { amountOf, underPolicy } from './session-tools.ts';
import { heldCallSession, type SessionRow } from './sessions.ts';

// A proxy call {server, endpoint, method, params?, body?, headers?}: one
// request to a connected provider's own API, with the session end user's
// connection (the provider's authentication applied by the provider HTTP
// adapter: guarded outbound client, no redirects followed). The endpoint is a
// path joined to the provider's base URL from the catalog and may not leave
// it; only the caller's non-authorization headers pass. Policies apply as to
// a tool call, under the tool name `<server>/proxy_execute`. Each call is
// recorded (`proxy_call.started`, then `.completed` with the provider's
// status, or `.failed` when it was not reached) and sealed; the record holds
// the path, query, body and header names, never the credential, the full URL
// or header values. Answers {status, data, headers, duration, proxy_call_id}
// whatever the provider's status; `provider_error` when the provider was not
// reached. Called by POST /v1/sessions/{id}/proxy_execute and approval
// execution (proxyExecutors, one per catalog provider).

export const PROXY_TOOL = 'proxy_execute';
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** Headers a caller may not set: credentials, and what the transport owns. */
const DROPPED = new Set(['authorization', 'proxy-authorization', 'cookie', 'host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'expect', 'proxy-connection']);
/** Answer headers never handed back (cookies, the transport's own). */
const HIDDEN = new Set(['set-cookie', 'connection', 'keep-alive', 'transfer-encoding']);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;

/** A proxy call's request (the body of the HTTP route, and a held call's input with its server). */
export const ProxyRequest = z.object({
  server: z.string().min(1).max(64),
  endpoint: z.string().min(1).max(2000).meta({ description: "A path under the provider's base URL, starting with /; no scheme or host, no '..', no encoded slash, dot or percent, no query (use params)" }),
  method: z.enum(METHODS).describe('The HTTP method to call the provider with.'),
  params: z.record(z.string().max(200), z.union([z.string().max(4000), z.number(), z.boolean()])).optional().meta({ description: 'The query string' }),
  body: z.unknown().optional().meta({ description: 'Sent as JSON' }),
  headers: z.record(z.string(), z.string().max(4000)).optional().meta({ description: "The caller's headers; authorization, cookies and the provider's credential headers never pass" }),
});
export type ProxyRequest = z.infer<typeof ProxyRequest>;
export type ProxyAnswer = { status: number; data: unknown; headers: Record<string, string>; duration: number; proxy_call_id: string };

const bad = (field: (string | number)[], message: string) => new Rejection('invalid_body', message, { issues: [{ path: field, code: 'invalid_value', message }] });

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

/** The provider and the request's checked parts, before anything is recorded (`invalid_body`, `not_connected`). */
async function prepare(ports: Ports, s: SessionRow, b: ProxyRequest) {
  if (!s.servers.includes(b.server)) throw bad(['server'], `${b.server} is not attached to this session`);
  const p = ports.providers.runtime.catalog.get(b.server);
  if (!p) throw bad(['server'], `no provider ${b.server} in the catalog`);
  checkEndpoint(b.endpoint);
  const headers = passedHeaders(p, b.headers);
  const baseUrl = ports.providers.baseUrl(p, s.environment);
  if (baseUrl) {
    const base = new URL(baseUrl);
    const basePath = base.pathname.replace(/\/$/, '');
    const joined = new URL(`${base.origin}${basePath}${b.endpoint}`);
    if (joined.origin !== base.origin || !(joined.pathname === basePath || joined.pathname.startsWith(`${basePath}/`))) throw bad(['endpoint'], "endpoint leaves the provider's base path");
  }
  const cred = await ports.providers.credentialFor(p, { orgId: s.org_id, projectId: s.project_id }, s.user_id);
  if (!cred.ok) throw new Rejection('not_connected', cred.error.message, { server: p.id });
  return { p, headers, baseUrl, cred };
}

/** One proxy call of a session (see above); `approvedBy` is set when a person approved this very call. */
export async function proxyExecute(ports: Ports, run: RunCommand, s: SessionRow, b: ProxyRequest, approvedBy: string | null = null): Promise<ProxyAnswer> {
  const { p, headers, baseUrl, cred } = await prepare(ports, s, b);
  const tenant = { orgId: s.org_id, projectId: s.project_id };
  const id = newId('pxc');
  const params = Object.fromEntries(Object.entries(b.params ?? {}).map(([k, v]) => [k, String(v)]));
  const opts = { orgId: tenant.orgId, projectId: tenant.projectId };
  const base = { proxy_call_id: id, session_id: s.id, server_id: p.id };
  const body = b.body === undefined || b.method === 'GET' || b.method === 'DELETE' ? undefined : b.body;
  const toolInput = { method: b.method, endpoint: b.endpoint, params, ...(body !== undefined ? { body } : {}), ...(b.headers ? { headers: b.headers } : {}) };
  const money = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const gate = await underPolicy(ports, run, s, { toolName: `${p.id}/${PROXY_TOOL}`, toolInput, amountMinor: amountOf(money), currency: typeof money.currency === 'string' ? money.currency : null, approvedBy }, (guard) =>
    run(proxyCallDecider, proxyCallStream(id), {
      type: 'start',
      data: { ...base, org_id: tenant.orgId, project_id: tenant.projectId, user_id: s.user_id, method: b.method, endpoint: b.endpoint, params, body: body ?? null, header_names: Object.keys(headers).sort(), called_at: ports.now().toISOString() },
    }, { ...opts, expectedRevision: 'no_stream', guard }),
  );
  // A denial or a hold is answered as the policy's body (the bare 403).
  if (!gate.ok) throw new Rejection(gate.code, gate.message, gate.denial);
  const started = Date.now();
  try {
    const r = await ports.providers.runtime.client.exchange(p, baseUrl, cred.credential, { method: b.method, path: b.endpoint, query: params, ...(body !== undefined ? { body } : {}), headers });
    const duration = Math.max(0, Date.now() - started);
    await run(proxyCallDecider, proxyCallStream(id), { type: 'complete', data: { ...base, status: r.status, data: r.json ?? null, duration_ms: duration, connection_id: cred.connectionId, at: ports.now().toISOString() } }, opts);
    if (r.status >= 400) await gate.release();
    const shown = Object.fromEntries(Object.entries(r.headers).filter(([k]) => !HIDDEN.has(k)));
    return { status: r.status, data: r.json ?? null, headers: shown, duration, proxy_call_id: id };
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    const duration = Math.max(0, Date.now() - started);
    await run(proxyCallDecider, proxyCallStream(id), { type: 'fail', data: { ...base, error_code: err.kind, error_message: err.message.slice(0, 500), duration_ms: duration, at: ports.now().toISOString() } }, opts);
    await gate.release();
    throw new Rejection('provider_error', err.message, { proxy_call_id: id, reason: err.kind, retriable: err.kind === 'unreachable' || err.kind === 'timeout' });
  }
}

/** Approval execution of proxy calls, one executor per catalog provider (`<server>/proxy_execute`): runs in its session with the held request verbatim. */
export function proxyExecutors(catalog: Pick<Catalog, 'providers'>): [string, ApprovalExecutor][] {
  return catalog.providers.map((p) => [
    `${p.id}/${PROXY_TOOL}`,
    async (call, ports, run) => {
      const s = await heldCallSession(ports, call);
      const held = ProxyRequest.safeParse({ ...call.tool_input, server: p.id });
      if (!held.success) throw new Rejection('invalid_held_call', 'the held proxy call cannot be read');
      const r = await proxyExecute(ports, run, s, held.data, call.decided_by ?? 'approval');
      return { proxy_call_id: r.proxy_call_id, status: r.status, data: r.data as unknown, duration_ms: r.duration };
    },
  ]);
}
