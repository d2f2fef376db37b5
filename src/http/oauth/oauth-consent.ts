import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PKCE_VALUE } from '../../../commands/oauth.ts';
import { randomString } from '../../ids.ts';
import { OAUTH_CONSENT_TTL_MS, OAUTH_STATE_MAX_CHARS } from '../../limits.ts';
import { oauthClient } from '../../usecases/oauth-clients.ts';
import { type ConsentRequest, grantConsent, migrateConsent, openConsent, takeConsent } from '../../usecases/oauth-consent.ts';
import { migratePasteGuard, PasteGuard } from '../../usecases/oauth-paste-guard.ts';
import { API_KEY_PATTERN, hashKey } from '../kernel/auth.ts';
import { redirectUriMatches } from '../../usecases/oauth-redirects.ts';
import { type OAuthShared, param } from './oauth-common.ts';
import { CONSENT_PAGES, cookieName, readCookie, refuse, sendError, sendPage } from './oauth-consent-page.ts';
import type { AppDeps } from '../kernel/route.ts';
import { escapeHtml, securityHeaders } from '../kernel/html.ts';

// The consent pages (spec Part 4.1): GET /oauth/authorize checks the request
// and shows who asks for what; POST /oauth/authorize takes the pasted API key
// and answers 302 to the client with a code. Every failure is a 400 HTML page,
// never a redirect. CSRF: the checked request is stored server side under a
// one-time handle that the form carries, bound to a cookie (the use cases of
// src/usecases/oauth-consent.ts). The pages' HTML and refusals are in
// oauth-consent-page.ts.

const HANDLE = /^[A-Za-z0-9]{43}$/;

/** What the two pages share: the per-address limits, the paste guard, the consent cookie, the issuer, the scope vocabulary. */
type Consent = { deps: AppDeps; shared: OAuthShared; guard: PasteGuard; cookie: { name: string; attrs: string } };

export async function consentRoutes(app: FastifyInstance, deps: AppDeps, shared: OAuthShared): Promise<void> {
  await migrateConsent(deps.db);
  (deps.pages ??= []).push(...CONSENT_PAGES);
  await migratePasteGuard(deps.db);
  const c: Consent = { deps, shared, guard: new PasteGuard(deps.db, shared.pasteGuard), cookie: cookieName(deps.baseUrl) };
  for (const [method, page] of [['GET', consentPage], ['POST', consentDecision]] as const) {
    app.route({
      method,
      url: '/oauth/authorize',
      errorHandler: (err, _req, reply) => void sendError(reply, err),
      handler: async (req, reply) => {
        try {
          return await page(c, req, reply);
        } catch (err) {
          return sendError(reply, err);
        }
      },
    });
  }
}

/** GET: the checked request stored under a new handle bound to the cookie, and the page that asks. */
async function consentPage({ deps, shared, guard, cookie }: Consent, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  await shared.limits.take('authorize', req);
  const { request, clientName } = await authorizationRequest(deps, req.query, shared.scopes);
  const now = deps.now();
  const existing = readCookie(req, cookie.name);
  const cookieValue = existing && HANDLE.test(existing) ? existing : randomString(43);
  const handle = await openConsent(deps.db, guard, now, cookieValue, request);
  reply.header('set-cookie', `${cookie.name}=${cookieValue}; ${cookie.attrs}; Max-Age=${OAUTH_CONSENT_TTL_MS / 1000}`);
  const target = new URL(request.redirectUri);
  const name = clientName ?? `An unnamed application (${request.clientId})`;
  const asked = request.scopes
    ? `<ul>${request.scopes.map((s) => `<li><code>${escapeHtml(s)}</code></li>`).join('')}</ul>`
    : '<p>Every scope the API key you paste holds.</p>';
  const body = `<h1>Authorize <span id="client-name">${escapeHtml(name)}</span></h1>
<p>This application asks for access to your account with these scopes:</p>${asked}
<p>After you decide you will be sent to <strong id="redirect-host">${escapeHtml(target.host)}</strong>.</p>
<div class="panel"><form method="post" action="/oauth/authorize">
<input type="hidden" name="handle" value="${handle}">
<div class="field"><label for="api_key">API key</label><span class="hint" id="api_key-hint">Paste an API key of your account. The application never sees it; it gets its own revocable tokens, limited to the scopes above.</span>
<input type="password" id="api_key" name="api_key" autocomplete="off" aria-describedby="api_key-hint" required></div>
<div class="actions"><button type="submit" name="decision" value="allow" class="btn btn-primary">Allow</button><button type="submit" name="decision" value="deny" class="btn btn-secondary" formnovalidate>Deny</button></div>
</form></div>`;
  return sendPage(reply, 200, `Authorize ${name}`, body, target.origin);
}

/** The authorization request's parameters, checked in order against the registered client (the first problem is the page's refusal). */
async function authorizationRequest(deps: AppDeps, q: unknown, vocabulary: OAuthShared['scopes']): Promise<{ request: ConsentRequest; clientName: string | null }> {
  const get = (name: string, required: boolean): string | undefined => {
    const v = param(q, name);
    if (v === null) throw refuse(`The parameter ${name} is given more than once.`);
    if (required && (v === undefined || v === '')) throw refuse(`The parameter ${name} is missing.`);
    return v;
  };
  const clientId = get('client_id', true)!;
  const c = await oauthClient(deps.db, clientId);
  if (!c) throw refuse('The application (client_id) is not registered.');
  const redirectUri = get('redirect_uri', true)!;
  if (!redirectUriMatches(c.redirect_uris, redirectUri)) throw refuse('The redirect_uri is not one the application registered.');
  if (get('response_type', true) !== 'code') throw refuse('response_type must be code.');
  const challenge = get('code_challenge', true)!;
  const method = get('code_challenge_method', true);
  if (method !== 'S256') throw refuse('code_challenge_method must be S256 (PKCE); plain is not accepted.');
  if (!PKCE_VALUE.test(challenge)) throw refuse('code_challenge must be 43 to 128 unreserved characters.');
  const scopeParam = get('scope', false);
  let scopes: string[] | null = null;
  if (scopeParam !== undefined && scopeParam.trim() !== '') {
    scopes = [...new Set(scopeParam.split(' ').filter((s) => s !== ''))];
    const unknown = scopes.filter((s) => !vocabulary().includes(s));
    if (unknown.length > 0) throw refuse(`Unknown scope: ${unknown.join(' ')}.`);
  }
  const state = get('state', false);
  if (state !== undefined && state.length > OAUTH_STATE_MAX_CHARS) throw refuse('state is too long.');
  return { request: { clientId, redirectUri, challenge, scopes, state }, clientName: c.client_name };
}

/** POST: the form's handle taken once; deny redirects with access_denied, allow (with a valid pasted key) with a code. */
async function consentDecision({ deps, shared, guard, cookie }: Consent, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  await shared.limits.take('authorize', req);
  const body = req.body;
  const handle = param(body, 'handle');
  if (typeof handle !== 'string' || !HANDLE.test(handle)) throw refuse('The consent form is incomplete.');
  const decision = param(body, 'decision') ?? 'allow';
  if (decision !== 'allow' && decision !== 'deny') throw refuse('The consent form is incomplete.');
  const now = deps.now();
  const { pending, attempt } = await takeConsent(deps.db, guard, { handle, cookie: readCookie(req, cookie.name), allow: decision === 'allow', address: req.ip, now });

  const back = new URL(pending.redirect_uri);
  const finish = (params: Record<string, string>) => {
    for (const [k, v] of Object.entries(params)) back.searchParams.append(k, v);
    if (pending.state !== null) back.searchParams.append('state', pending.state);
    back.searchParams.append('iss', shared.urls.issuer);
    securityHeaders(reply);
    return reply.code(302).header('location', back.href).send();
  };
  if (decision === 'deny') return finish({ error: 'access_denied' });

  const key = param(body, 'api_key');
  if (typeof key !== 'string' || !API_KEY_PATTERN.test(key.trim())) throw refuse('The API key is not valid.');
  const code = await grantConsent(deps, guard, { pending, attempt: attempt!, keyHash: hashKey(key.trim()), requestId: String(req.id), now });
  return finish({ code });
}
