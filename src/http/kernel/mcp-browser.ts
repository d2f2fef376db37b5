import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ApiError } from './errors.ts';
import type { AppDeps, RouteSpec } from './route.ts';

// Who may reach an MCP endpoint from a browser (the session MCP endpoint and
// the paying gateway), one rule for both, checked before anything else of the
// request runs (credentials, body, tools, payments):
// - `Origin`: none (a non-browser client), the service's own origin
//   (PUBLIC_BASE_URL, and the gateway's public base), or one of
//   MCP_ALLOWED_ORIGINS, or the service itself under a loopback alias: an
//   Origin `http(s)://<localhost|127.0.0.1|[::1]>:<port>` sent with the same
//   `Host`, the port being the service's (the one the request reached, or its
//   URLs' own), as the MCP SDK's localhost host validation accepts; anything
//   else answers 403 `origin_not_allowed`. A page elsewhere (another local
//   port, a rebound name) cannot send that pair: a browser sets both headers.
//   MCP's Streamable HTTP transport requires servers to validate Origin
//   (DNS rebinding).
// - `Host`, on a connection that reached us on a loopback address: a loopback
//   name or the host of the service's own URLs; anything else (a rebound DNS
//   name pointing at 127.0.0.1) answers 403 `host_not_allowed`.
// The same allowed origins get CORS: preflights (OPTIONS) answer 204 with the
// methods and headers an MCP client sends, and responses expose the headers
// it reads (session and protocol version, x402's payment headers).

export const MCP_ORIGIN_ERRORS = [
  [403, 'origin_not_allowed'],
  [403, 'host_not_allowed'],
] as const;

const EXPOSED = ['mcp-session-id', 'mcp-protocol-version', 'payment-required', 'payment-response', 'x-payment-response', 'www-authenticate', 'x-request-id'];
const METHODS = ['GET', 'POST', 'OPTIONS'];
const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/** An origin in its serialized form (scheme://host[:port], default port dropped), or null for anything else ("null" included). */
export function originOf(raw: string): string | null {
  try {
    const u = new URL(raw);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    return u.origin;
  } catch {
    return null;
  }
}

const hostnameOf = (hostHeader: string): string | null => {
  try {
    return new URL(`http://${hostHeader}`).hostname.toLowerCase();
  } catch {
    return null;
  }
};

const isLoopbackAddress = (a: string | undefined) => a !== undefined && (/^127\./.test(a) || a === '::1' || /^::ffff:127\./i.test(a));

export type McpOriginRule = { origins: ReadonlySet<string>; hosts: ReadonlySet<string>; ports: ReadonlySet<string> };

/** The port of a URL, its scheme's default when it names none. */
const portOf = (u: URL) => u.port || (u.protocol === 'https:' ? '443' : '80');

/** The allowed origins and (loopback) hosts, from the service's URLs and MCP_ALLOWED_ORIGINS. */
export function mcpOriginRule(deps: AppDeps): McpOriginRule {
  const own = [deps.baseUrl, deps.mcp?.gatewayUrl].filter((u): u is string => typeof u === 'string');
  const origins = new Set<string>();
  const hosts = new Set(LOOPBACK_NAMES);
  const ports = new Set<string>();
  for (const u of own) {
    const o = originOf(u);
    if (o) origins.add(o);
    hosts.add(new URL(u).hostname.toLowerCase());
    ports.add(portOf(new URL(u)));
  }
  for (const o of deps.mcp?.allowedOrigins ?? []) {
    const n = originOf(o);
    if (n) origins.add(n);
  }
  return { origins, hosts, ports };
}

/** The service itself under a loopback alias: the Origin names exactly the Host the request was sent to, a loopback name on the service's port. */
function isOwnLoopbackOrigin(rule: McpOriginRule, req: FastifyRequest, origin: string): boolean {
  const host = req.headers.host;
  if (typeof host !== 'string') return false;
  const o = new URL(origin);
  let h: URL;
  try {
    h = new URL(`${o.protocol}//${host}`);
  } catch {
    return false;
  }
  if (h.origin !== origin || !LOOPBACK_NAMES.has(h.hostname.toLowerCase())) return false;
  const port = portOf(h);
  return rule.ports.has(port) || String(req.socket?.localPort) === port;
}

/** The rule applied to one request: throws the 403; returns the allowed browser origin, if any. */
export function checkMcpOrigin(rule: McpOriginRule, req: FastifyRequest): string | undefined {
  const host = req.headers.host;
  if (typeof host === 'string' && isLoopbackAddress(req.socket?.localAddress)) {
    const name = hostnameOf(host);
    if (name === null || !rule.hosts.has(name)) throw new ApiError(403, 'host_not_allowed', 'this MCP endpoint is not served under that host name');
  }
  const raw = req.headers.origin;
  if (raw === undefined) return undefined;
  const origin = typeof raw === 'string' ? originOf(raw) : null;
  if (origin === null || !(rule.origins.has(origin) || isOwnLoopbackOrigin(rule, req, origin))) throw new ApiError(403, 'origin_not_allowed', 'requests from this origin are not allowed (MCP_ALLOWED_ORIGINS)');
  return origin;
}

/**
 * Installs the rule on a plugin scope (every route of the scope, so call it from
 * the scope that holds the MCP routes alone). The scope's own route module
 * declares the preflight routes (mcpPreflight).
 */
export function mcpOriginHook(app: FastifyInstance, deps: AppDeps): void {
  const rule = mcpOriginRule(deps);
  app.addHook('onRequest', async (req, reply) => {
    const origin = checkMcpOrigin(rule, req);
    reply.header('vary', 'Origin');
    if (origin === undefined) return;
    reply.header('access-control-allow-origin', origin);
    reply.header('access-control-expose-headers', EXPOSED.join(', '));
  });
}

/** The CORS preflight declaration of an MCP URL: 204 with the methods and the headers an MCP client sends. */
export function mcpPreflight<P>(u: { url: string; params: z.ZodType<P>; operationId: string; tag: string }, allowHeaders: string[]): RouteSpec<P, unknown, unknown, 'open'> {
  return {
    method: 'OPTIONS',
    url: u.url,
    operationId: u.operationId,
    summary: 'CORS preflight: 204 for an allowed origin (the service’s own, also as localhost, 127.0.0.1 or [::1] on its port, MCP_ALLOWED_ORIGINS), 403 for any other',
    tags: [u.tag],
    auth: 'open',
    params: u.params,
    responses: { 204: null },
    errors: [...MCP_ORIGIN_ERRORS],
    async handler() {
      return {
        status: 204,
        headers: {
          allow: METHODS.join(', '),
          'access-control-allow-methods': METHODS.join(', '),
          'access-control-allow-headers': allowHeaders.join(', '),
          'access-control-max-age': '600',
        },
      };
    },
  };
}
