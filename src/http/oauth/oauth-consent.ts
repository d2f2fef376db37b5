import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PKCE_VALUE } from '../../../commands/oauth.ts';
import { randomString } from '../../ids.ts';
import { OAUTH_CONSENT_TTL_MS, OAUTH_STATE_MAX_CHARS } from '../../limits.ts';
import { oauthClient } from '../../usecases/oauth-clients.ts';
import { checkPastedKey, CONSENT_KEY_REFUSED, type ConsentRequest, grantConsent, migrateConsent, openConsent, requestOf, takeConsent } from '../../usecases/oauth-consent.ts';
import { Rejection } from '../../eventstore/handler.ts';
import { migratePasteGuard, PasteGuard } from '../../usecases/oauth-paste-guard.ts';
import { API_KEY_PATTERN, hashKey } from '../kernel/auth.ts';
import { redirectUriMatches } from '../../usecases/oauth-redirects.ts';
import { type OAuthShared, param } from './oauth-common.ts';
import { askBody, CONSENT_PAGES, confirmBody, cookieName, readCookie, refuse, sendError, sendPage } from './oauth-consent-page.ts';
import type { AppDeps } from '../kernel/route.ts';
import { securityHeaders } from '../kernel/html.ts';

// The consent pages (spec Part 4.1): GET /oauth/authorize checks the request
// and shows who asks for what; POST /oauth/authorize takes the pasted API key
// and shows what it grants (organization, environment, project, scopes), or
// the form again with an inline error after a wrong key; the confirmation's
// Allow answers 302 to the client with a code. Every other failure is a 400
// HTML page, never a redirect. CSRF: the checked request is stored server side under a
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
  const page = askBody({ clientName, clientId: request.clientId, redirect: target, handle, scopes: request.scopes });
  return sendPage(reply, 200, page.title, page.body, target.origin);
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

  if (pending.key_id !== null) {
    // The confirmation's Allow: the grant for the key it is bound to.
    const code = await grantConsent(deps, { pending, requestId: String(req.id), now });
    return finish({ code });
  }
  // The form where a key is pasted: a valid key leads to the confirmation, a wrong one to the form again with its error.
  const client = await oauthClient(deps.db, pending.client_id);
  const cookieValue = readCookie(req, cookie.name)!;
  const asker = (handle: string) => ({ clientName: client?.client_name ?? null, clientId: pending.client_id, redirect: back, handle });
  const key = param(body, 'api_key');
  try {
    if (typeof key !== 'string' || !API_KEY_PATTERN.test(key.trim())) throw new Rejection(CONSENT_KEY_REFUSED, 'This API key is not valid: an API key is sk_test_ or sk_live_ followed by 32 letters and digits. Paste a key of your account.');
    const granted = await checkPastedKey(deps, guard, { pending, attempt: attempt!, keyHash: hashKey(key.trim()) });
    const page = confirmBody({ ...asker(await openConsent(deps.db, guard, now, cookieValue, requestOf(pending), granted.keyId)), key: granted });
    return sendPage(reply, 200, page.title, page.body, back.origin);
  } catch (err) {
    if (!(err instanceof Rejection && err.code === CONSENT_KEY_REFUSED)) throw err;
    const page = askBody({ ...asker(await openConsent(deps.db, guard, now, cookieValue, requestOf(pending))), scopes: pending.scopes, error: err.message });
    return sendPage(reply, 400, page.title, page.body, back.origin);
  }
}
