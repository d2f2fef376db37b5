import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Rejection } from '../../eventstore/handler.ts';
import { OAUTH_STATE_MAX_CHARS } from '../../limits.ts';
import { CONSENT_REFUSED } from '../../usecases/oauth-consent.ts';
import { errorResponse, RawHttpError } from '../kernel/errors.ts';
import { escapeHtml, securityHeaders } from '../kernel/html.ts';
import { servicePage } from '../../dashboard/look.tsx';
import type { PageSpec } from '../kernel/openapi.ts';

// The consent pages' HTML and their wire (no routes: oauth-consent.ts mounts
// them): the page in the dashboard's look (its public shell and stylesheet,
// no script) and its security headers, the refusal pages (a 400, never a
// redirect; 429 with Retry-After), the consent cookie, and the two pages'
// OpenAPI declarations.

export function sendPage(reply: FastifyReply, status: number, title: string, body: string, formTarget?: string): FastifyReply {
  securityHeaders(reply, formTarget ? { formTarget } : {});
  return reply.code(status).type('text/html; charset=utf-8').send(servicePage({ title, bodyHtml: body, heading: false }));
}

/** A refusal as a 400 HTML page (never a redirect). */
class PageError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
  ) {
    super(detail);
  }
}
export const refuse = (detail: string, title = 'This authorization request cannot be completed') => new PageError(400, title, detail);

/** Any failure as a page: a refusal (the consent use cases' `consent_refused` too) with its sentence, too many attempts as 429, else a bare 400. */
export function sendError(reply: FastifyReply, err: unknown): FastifyReply {
  const page = err instanceof PageError ? err : err instanceof Rejection && err.code === CONSENT_REFUSED ? refuse(err.message) : undefined;
  if (page) return sendPage(reply, page.status, page.title, `<h1>${escapeHtml(page.title)}</h1><p>${escapeHtml(page.detail)}</p><p>Return to the application and start again.</p>`);
  // The per-address limits (oauth-common.ts) and the paste guard's `key_paste_limited`, with their Retry-After.
  const limited = err instanceof RawHttpError || err instanceof Rejection ? errorResponse(err, String(reply.request.id)) : undefined;
  if (limited?.status === 429) {
    reply.headers(limited.headers);
    return sendPage(reply, 429, 'Too many attempts', '<h1>Too many attempts</h1><p>Too many requests from this address. Wait a while and start again from the application.</p>');
  }
  reply.log.error({ err }, 'consent page failed');
  return sendPage(reply, 400, 'This authorization request cannot be completed', '<h1>This authorization request cannot be completed</h1><p>Return to the application and start again.</p>');
}

export function cookieName(baseUrl: string): { name: string; attrs: string } {
  const secure = baseUrl.startsWith('https:');
  return secure ? { name: '__Host-oauth_consent', attrs: 'Path=/; HttpOnly; Secure; SameSite=Strict' } : { name: 'oauth_consent', attrs: 'Path=/oauth; HttpOnly; SameSite=Strict' };
}

export function readCookie(req: FastifyRequest, name: string): string | undefined {
  const h = req.headers.cookie;
  if (typeof h !== 'string') return undefined;
  for (const part of h.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

const REFUSED = { description: 'A refusal page (never a redirect): the request or the form cannot be completed', html: true } as const;
const TOO_MANY = { description: 'Too many attempts from this address (Retry-After)', html: true, headers: { 'retry-after': 'Seconds to wait' } } as const;

/** The two consent pages in the OpenAPI document (they answer HTML to a person's browser; no credential). */
export const CONSENT_PAGES: PageSpec[] = [
  {
    method: 'GET',
    url: '/oauth/authorize',
    operationId: 'oauthAuthorizePage',
    summary: 'The consent page (HTML): who asks for which scopes, and a form where the person pastes an API key (PKCE S256 only)',
    tags: ['oauth'],
    query: z.object({
      client_id: z.string(),
      redirect_uri: z.string(),
      response_type: z.literal('code'),
      code_challenge: z.string().min(43).max(128),
      code_challenge_method: z.literal('S256'),
      scope: z.string().optional(),
      state: z.string().max(OAUTH_STATE_MAX_CHARS).optional(),
    }),
    responses: { 200: { description: 'The consent page', html: true, headers: { 'set-cookie': 'The consent cookie the form is bound to' } }, 400: REFUSED, 429: TOO_MANY },
  },
  {
    method: 'POST',
    url: '/oauth/authorize',
    operationId: 'oauthAuthorizeDecide',
    summary: "The consent form's answer: allow (with the pasted API key) redirects to the client with a single-use code; deny with error=access_denied",
    tags: ['oauth'],
    form: z.object({ handle: z.string(), decision: z.enum(['allow', 'deny']).optional(), api_key: z.string().optional() }),
    responses: { 302: { description: 'Back to the redirect_uri with code (or error=access_denied), state and iss', headers: { location: 'The client redirect_uri with its parameters' } }, 400: REFUSED, 429: TOO_MANY },
  },
];
