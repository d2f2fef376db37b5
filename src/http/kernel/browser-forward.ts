import type { Server } from 'node:http';
import os from 'node:os';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { BROWSER_FORWARD_TIMEOUT_MS } from '../../limits.ts';
import { bindSelf, forget, migrateBrowserOwners, OwnedElsewhere, selfOf } from '../../usecases/browser-owners.ts';
import type { Ports } from '../../usecases/context.ts';
import type { Reply } from './route.ts';

// A request for a browser context another instance holds (a hosted-connect
// live view or finish, a paused signup run's code or resend) is forwarded to
// that instance over HTTP and its answer relayed: status, headers, and the
// body (a live view's server-sent events streamed as they come). The
// forwarded request carries FORWARDED_HEADER, and an instance never forwards
// such a request again (a stale claim cannot bounce it between instances).
// When the owner cannot be reached (it stopped, it crashed) its claim is
// dropped and the request is answered here, as by an instance that never had
// the context: 404 for a live view, 410 session_expired for a finish,
// resume_inputs_unavailable for a signup run. Nothing is logged here: a
// verification code or a live-view token may be in the request.

export const FORWARDED_HEADER = 'x-svc-forwarded-by';

/** Request headers not passed on (hop by hop, or recomputed). */
const DROP_REQUEST = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length', 'accept-encoding', 'proxy-authorization', 'proxy-connection', FORWARDED_HEADER]);
/** Response headers not relayed (hop by hop, recomputed, or already set by this instance). */
const DROP_RESPONSE = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'content-encoding', 'date', 'x-request-id']);

/** The first address of this machine other machines can reach (for a service listening on every interface). */
function externalAddress(): string | undefined {
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) if (!a.internal && a.family === 'IPv4') return a.address;
  return undefined;
}

/** Where other instances reach this one when INSTANCE_URL is not set: the address the server listens on (an outside address for the wildcard). */
export function listeningUrl(server: Server): string | undefined {
  const a = server.listening ? server.address() : null;
  if (!a || typeof a === 'string') return undefined;
  const host = a.address === '0.0.0.0' || a.address === '::' ? (externalAddress() ?? '127.0.0.1') : a.address;
  return `http://${host.includes(':') ? `[${host}]` : host}:${a.port}`;
}

/** Whether this request may still be forwarded (it has not been already). */
export const mayForward = (req: FastifyRequest) => req.headers[FORWARDED_HEADER] === undefined;

/**
 * Runs `answer`; when it throws OwnedElsewhere, the request goes to the owner
 * and its answer comes back. An owner that cannot be reached loses its claim,
 * and `answer` runs again without forwarding.
 */
export async function orForwarded(deps: Ports, req: FastifyRequest, reply: FastifyReply, answer: (mayForward: boolean) => Promise<Reply>): Promise<Reply> {
  try {
    return await answer(mayForward(req));
  } catch (err) {
    if (!(err instanceof OwnedElsewhere)) throw err;
    const relayed = await relay(deps, err.url, req, reply);
    if (relayed) return relayed;
    await forget(deps, err.key);
    return answer(false);
  }
}

function requestHeaders(deps: Ports, req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !DROP_REQUEST.has(k)) out[k] = Array.isArray(v) ? v.join(', ') : v;
  out[FORWARDED_HEADER] = selfOf(deps).id;
  out['x-request-id'] = String(req.id); // one request id on both instances (the owner echoes a well-formed one)
  if (req.body !== undefined) out['content-type'] = 'application/json';
  return out;
}

/** The owner's answer, or undefined when it could not be had (refused, unreachable, no headers in time). */
async function relay(deps: Ports, url: string, req: FastifyRequest, reply: FastifyReply): Promise<Reply | undefined> {
  const upstream = new AbortController();
  // The caller left (a viewer closed the live view): the owner sees its viewer leave too.
  reply.raw.once('close', () => upstream.abort());
  const timer = setTimeout(() => upstream.abort(), BROWSER_FORWARD_TIMEOUT_MS);
  let res: Response;
  try {
    res = await fetch(`${url}${req.url}`, {
      method: req.method,
      headers: requestHeaders(deps, req),
      ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
      redirect: 'manual',
      signal: upstream.signal,
    });
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
  const headers: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    if (!DROP_RESPONSE.has(k) && k !== 'set-cookie') headers[k] = v;
  });
  // The routes forwarded here set at most one cookie (the live view's viewer binding).
  const cookie = res.headers.getSetCookie()[0];
  if (cookie) headers['set-cookie'] = cookie;
  const type = headers['content-type'] ?? '';
  if (type.startsWith('text/event-stream') && res.body) return { status: res.status, headers, body: Readable.fromWeb(res.body as WebReadableStream<Uint8Array>) };
  const text = await res.text().catch(() => undefined);
  if (text === undefined) return undefined;
  if (res.status === 204 || text === '') return { status: res.status, headers };
  let json: unknown;
  try {
    json = type.startsWith('application/json') ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (json === undefined) return { status: res.status, headers, body: text };
  // Sent again as this instance sends JSON (and checked against the route's schema on the way).
  const { 'content-type': _json, ...rest } = headers;
  return { status: res.status, headers: rest, body: json };
}

/** Readies this instance to hold browser contexts others may ask for: the claims' table, and the URL it is reached at (INSTANCE_URL, else the address it listens on). */
export async function browserInstance(app: { server: Server }, deps: Ports, worker: { instanceUrl?: string | undefined } | undefined): Promise<void> {
  await migrateBrowserOwners(deps.db);
  bindSelf(deps, () => worker?.instanceUrl ?? listeningUrl(app.server));
}
