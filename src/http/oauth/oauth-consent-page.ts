import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Rejection } from '../../eventstore/handler.ts';
import { OAUTH_STATE_MAX_CHARS } from '../../limits.ts';
import { CONSENT_REFUSED, type ConsentKey } from '../../usecases/oauth-consent.ts';
import { errorResponse, RawHttpError } from '../kernel/errors.ts';
import { escapeHtml, securityHeaders } from '../kernel/html.ts';
import { servicePage } from '../../dashboard/look.tsx';
import type { PageSpec } from '../kernel/openapi.ts';
import { scopeSentence } from './oauth-scope-words.ts';

// The consent pages' HTML and their wire (no routes: oauth-consent.ts mounts
// them): the page in the dashboard's look (its public shell and stylesheet,
// no script) and its security headers, the form where a key is pasted (again
// with an inline error after a wrong one), the confirmation that names what is
// granted, the refusal pages (a 400, never a redirect; 429 with Retry-After),
// the consent cookie, and the two pages' OpenAPI declarations.

/** The service a person grants access to, as every page of it is branded. */
export const SERVICE_NAME = 'Agent Ledger';

/** Who asks: the name a client registered for itself (every client registers itself: none is verified), and where the person goes next. */
export type Asker = { clientName: string | null; clientId: string; redirect: URL; handle: string };

const nameOf = (a: Asker) => a.clientName ?? `An unnamed application (${a.clientId})`;

function askerHtml(a: Asker): string {
  return `<p><span class="badge badge-warn" id="client-unverified">Unverified application</span> This application registered itself (client id <code>${escapeHtml(a.clientId)}</code>): ${SERVICE_NAME} has not checked that its name is true. Go on only if you started this from an application you trust.</p>`;
}

function scopesHtml(scopes: string[] | null, caption: string): string {
  if (!scopes) return `<p id="scopes">${escapeHtml(caption)}: everything the API key you paste can do (the application asked for no narrower scope).</p>`;
  const rows = scopes.map((s) => `<tr><td>${escapeHtml(scopeSentence(s))}</td><td><code>${escapeHtml(s)}</code></td></tr>`).join('');
  return `<div class="table-wrap"><table class="data" id="scopes"><caption>${escapeHtml(caption)}</caption><thead><tr><th scope="col">Access</th><th scope="col">Scope</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

const goingTo = (a: Asker) => `<p>After you decide you will be sent to <strong id="redirect-host">${escapeHtml(a.redirect.host)}</strong>.</p>`;

/** The form where a person pastes a key: `error` after a wrong one, beside the field and in a summary at the top (GOV.UK's pattern). */
export function askBody(a: Asker & { scopes: string[] | null; error?: string | undefined }): { title: string; body: string } {
  const name = nameOf(a);
  const error = a.error
    ? `<div class="error-summary" role="alert" aria-labelledby="error-summary-title" tabindex="-1"><h2 id="error-summary-title">There is a problem</h2><ul><li><a href="#api_key">${escapeHtml(a.error)}</a></li></ul></div>`
    : '';
  const fieldError = a.error ? `<span class="field-error" id="api_key-error"><span class="visually-hidden">Error: </span>${escapeHtml(a.error)}</span>` : '';
  const body = `${error}<h1>Authorize <span id="client-name">${escapeHtml(name)}</span> to use your <span id="service-name">${SERVICE_NAME}</span> account</h1>
${askerHtml(a)}
${scopesHtml(a.scopes, 'It asks to')}
${goingTo(a)}
<div class="panel"><form method="post" action="/oauth/authorize">
<input type="hidden" name="handle" value="${a.handle}">
<div class="field"><label for="api_key">API key</label><span class="hint" id="api_key-hint">Paste an API key of the organization and environment you grant: a test key (sk_test_) grants test data only, a live key (sk_live_) live data only. You will see the organization and environment before you allow. The application never sees the key; it gets its own revocable tokens, limited to the scopes above.</span>
${fieldError}<input type="password" id="api_key" name="api_key" autocomplete="off" aria-describedby="api_key-hint${a.error ? ' api_key-error' : ''}"${a.error ? ' aria-invalid="true"' : ''} required></div>
<div class="actions"><button type="submit" name="decision" value="allow" class="btn btn-primary">Continue</button><button type="submit" name="decision" value="deny" class="btn btn-secondary" formnovalidate>Deny</button></div>
</form></div>`;
  return { title: `${a.error ? 'Error: ' : ''}Authorize ${name}`, body };
}

/** The confirmation: the service, organization, environment and project the grant acts in, the scopes in words; Allow is the primary action. */
export function confirmBody(a: Asker & { key: ConsentKey }): { title: string; body: string } {
  const name = nameOf(a);
  const { key } = a;
  const env = key.environment === 'live' ? '<span class="badge badge-danger">Live</span> live data: real money moves' : '<span class="badge badge-neutral">Test</span> test data only: nothing here moves real money';
  const project = key.projectName !== null ? escapeHtml(key.projectName) : `every ${key.environment} project of the organization (the application picks one per request)`;
  const body = `<h1>Allow <span id="client-name">${escapeHtml(name)}</span> to act in <span id="grant-org-name">${escapeHtml(key.orgName)}</span>?</h1>
${askerHtml(a)}
<div class="table-wrap"><table class="data" id="grant"><caption>What you grant</caption><tbody>
<tr><th scope="row">Service</th><td id="service-name">${SERVICE_NAME}</td></tr>
<tr><th scope="row">Organization</th><td id="grant-org">${escapeHtml(key.orgName)}</td></tr>
<tr><th scope="row">Environment</th><td id="grant-environment">${env}</td></tr>
<tr><th scope="row">Projects</th><td id="grant-project">${project}</td></tr>
</tbody></table></div>
${scopesHtml(key.scopes, 'It will be able to')}
${goingTo(a)}
<form method="post" action="/oauth/authorize">
<input type="hidden" name="handle" value="${a.handle}">
<div class="actions"><button type="submit" name="decision" value="allow" class="btn btn-primary">Allow</button><button type="submit" name="decision" value="deny" class="btn btn-secondary">Deny</button></div>
</form>`;
  return { title: `Allow ${name} to act in ${key.orgName}`, body };
}

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
    summary: "The consent form's answer: a valid pasted API key leads to the confirmation naming the organization, environment and project; its Allow redirects to the client with a single-use code; deny with error=access_denied",
    tags: ['oauth'],
    form: z.object({ handle: z.string().describe('The consent request, as the page received it (a hidden field).'), decision: z.enum(['allow', 'deny']).optional(), api_key: z.string().optional() }),
    responses: {
      200: { description: 'The confirmation (HTML): the organization, environment, project and scopes the pasted key grants, with Allow and Deny', html: true },
      302: { description: 'Back to the redirect_uri with code (or error=access_denied), state and iss', headers: { location: 'The client redirect_uri with its parameters' } },
      400: { description: 'The form again with the error beside the field after a wrong key, or a refusal page (never a redirect)', html: true },
      429: TOO_MANY,
    },
  },
];
