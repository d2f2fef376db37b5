import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { oauthGrantDecider, oauthGrantStream, PKCE_VALUE, sha256Hex } from '../../commands/oauth.ts';
import { handleCommand } from '../eventstore/handler.ts';
import { randomString } from '../ids.ts';
import { OAUTH_CODE_TTL_MS, OAUTH_CONSENT_TTL_MS, OAUTH_STATE_MAX_CHARS } from '../limits.ts';
import type { Db } from '../postgres/db.ts';
import { API_KEY_PATTERN, hashKey, hasScope } from './auth.ts';
import { RawHttpError } from './errors.ts';
import { type AddressLimits, type OAuthShared, param, redirectUriMatches } from './oauth-common.ts';
import { mintSecret, newGrantId } from '../usecases/oauth-tokens.ts';
import { migratePasteGuard, PasteGuard, type PasteAttempt, type PasteGuardConfig } from './oauth-paste-guard.ts';
import type { AppDeps } from './route.ts';
import type { PageSpec } from './openapi.ts';
import { escapeHtml, securityHeaders } from './html.ts';

// The consent pages (spec Part 4.1): GET /oauth/authorize checks the request
// and shows who asks for what; POST /oauth/authorize takes the pasted API key
// and answers 302 to the client with a code. Every failure is a 400 HTML page,
// never a redirect. CSRF: the checked request is stored server side under a
// one-time handle that the form carries, bound to a cookie (both stored as
// SHA-256 hashes). The pending request is an operational record, not a fact;
// the grant it leads to is an event.

const HANDLE = /^[A-Za-z0-9]{43}$/;

export async function migrateConsent(db: Db): Promise<void> {
  await db.query(`CREATE TABLE IF NOT EXISTS oauth_consent_requests (
    handle_hash text PRIMARY KEY,
    cookie_hash text NOT NULL,
    client_id text NOT NULL,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    scopes jsonb,
    state text,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
  );
  CREATE INDEX IF NOT EXISTS oauth_consent_requests_expires ON oauth_consent_requests (expires_at)`);
}

const STYLE = 'body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a}code{background:#f2f2f2;padding:0 .2rem}label{display:block;margin:1rem 0 .3rem}input[type=password]{width:100%;padding:.4rem}button{margin:1rem .5rem 0 0;padding:.4rem 1rem}';

function layout(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`;
}

function sendPage(reply: FastifyReply, status: number, title: string, body: string, formTarget?: string): FastifyReply {
  securityHeaders(reply, formTarget ? { formTarget } : {});
  return reply.code(status).type('text/html; charset=utf-8').send(layout(title, body));
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
const refuse = (detail: string, title = 'This authorization request cannot be completed') => new PageError(400, title, detail);

function sendError(reply: FastifyReply, err: unknown): FastifyReply {
  if (err instanceof PageError) return sendPage(reply, err.status, err.title, `<h1>${escapeHtml(err.title)}</h1><p>${escapeHtml(err.detail)}</p><p>Return to the application and start again.</p>`);
  if (err instanceof RawHttpError && err.status === 429) {
    reply.headers(err.headers);
    return sendPage(reply, 429, 'Too many attempts', '<h1>Too many attempts</h1><p>Too many requests from this address. Wait a while and start again from the application.</p>');
  }
  reply.log.error({ err }, 'consent page failed');
  return sendPage(reply, 400, 'This authorization request cannot be completed', '<h1>This authorization request cannot be completed</h1><p>Return to the application and start again.</p>');
}

function cookieName(baseUrl: string): { name: string; attrs: string } {
  const secure = baseUrl.startsWith('https:');
  return secure ? { name: '__Host-oauth_consent', attrs: 'Path=/; HttpOnly; Secure; SameSite=Strict' } : { name: 'oauth_consent', attrs: 'Path=/oauth; HttpOnly; SameSite=Strict' };
}

function readCookie(req: FastifyRequest, name: string): string | undefined {
  const h = req.headers.cookie;
  if (typeof h !== 'string') return undefined;
  for (const part of h.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

type ConsentRow = { cookie_hash: string; client_id: string; redirect_uri: string; code_challenge: string; scopes: string[] | null; state: string | null; used_at: Date | null };

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

export async function consentRoutes(app: FastifyInstance, deps: AppDeps, shared: OAuthShared): Promise<void> {
  const { limits, pasteGuard, urls, scopes: vocabulary } = shared;
  await migrateConsent(deps.db);
  (deps.pages ??= []).push(...CONSENT_PAGES);
  await migratePasteGuard(deps.db);
  const guard = new PasteGuard(deps.db, pasteGuard);
  const cookie = cookieName(deps.baseUrl);

  async function client(clientId: string) {
    const { rows } = await deps.db.query<{ client_name: string | null; redirect_uris: string[] }>('SELECT client_name, redirect_uris FROM oauth_clients WHERE client_id = $1', [clientId]);
    return rows[0];
  }

  app.route({
    method: 'GET',
    url: '/oauth/authorize',
    errorHandler: (err, _req, reply) => void sendError(reply, err),
    handler: async (req, reply) => {
      try {
        limits.take('authorize', req);
        const q = req.query;
        const get = (name: string, required: boolean): string | undefined => {
          const v = param(q, name);
          if (v === null) throw refuse(`The parameter ${name} is given more than once.`);
          if (required && (v === undefined || v === '')) throw refuse(`The parameter ${name} is missing.`);
          return v;
        };
        const clientId = get('client_id', true)!;
        const c = await client(clientId);
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

        const now = deps.now();
        const existing = readCookie(req, cookie.name);
        const cookieValue = existing && HANDLE.test(existing) ? existing : randomString(43);
        const handle = randomString(43);
        await deps.db.query('DELETE FROM oauth_consent_requests WHERE expires_at < $1', [new Date(now.getTime() - OAUTH_CONSENT_TTL_MS).toISOString()]);
        await guard.sweep(now);
        await deps.db.query(
          `INSERT INTO oauth_consent_requests (handle_hash, cookie_hash, client_id, redirect_uri, code_challenge, scopes, state, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
          [sha256Hex(handle), sha256Hex(cookieValue), clientId, redirectUri, challenge, scopes ? JSON.stringify(scopes) : null, state ?? null, new Date(now.getTime() + OAUTH_CONSENT_TTL_MS).toISOString()],
        );
        reply.header('set-cookie', `${cookie.name}=${cookieValue}; ${cookie.attrs}; Max-Age=${OAUTH_CONSENT_TTL_MS / 1000}`);
        const target = new URL(redirectUri);
        const name = c.client_name ?? `An unnamed application (${clientId})`;
        const asked = scopes
          ? `<ul>${scopes.map((s) => `<li><code>${escapeHtml(s)}</code></li>`).join('')}</ul>`
          : '<p>Every scope the API key you paste holds.</p>';
        const body = `<h1>Authorize <span id="client-name">${escapeHtml(name)}</span></h1>
<p>This application asks for access to your account with these scopes:</p>${asked}
<p>After you decide you will be sent to <strong id="redirect-host">${escapeHtml(target.host)}</strong>.</p>
<form method="post" action="/oauth/authorize">
<input type="hidden" name="handle" value="${handle}">
<label for="api_key">Paste an API key of your account. The application never sees it; it gets its own revocable tokens, limited to the scopes above.</label>
<input type="password" id="api_key" name="api_key" autocomplete="off" required>
<button type="submit" name="decision" value="allow">Allow</button><button type="submit" name="decision" value="deny" formnovalidate>Deny</button>
</form>`;
        return sendPage(reply, 200, `Authorize ${name}`, body, target.origin);
      } catch (err) {
        return sendError(reply, err);
      }
    },
  });

  app.route({
    method: 'POST',
    url: '/oauth/authorize',
    errorHandler: (err, _req, reply) => void sendError(reply, err),
    handler: async (req, reply) => {
      try {
        limits.take('authorize', req);
        const body = req.body;
        const handle = param(body, 'handle');
        if (typeof handle !== 'string' || !HANDLE.test(handle)) throw refuse('The consent form is incomplete.');
        const decision = param(body, 'decision') ?? 'allow';
        if (decision !== 'allow' && decision !== 'deny') throw refuse('The consent form is incomplete.');
        const now = deps.now();
        const { rows } = await deps.db.query<ConsentRow>(
          'SELECT cookie_hash, client_id, redirect_uri, code_challenge, scopes, state, used_at FROM oauth_consent_requests WHERE handle_hash = $1 AND expires_at > $2',
          [sha256Hex(handle), now.toISOString()],
        );
        const pending = rows[0];
        if (!pending) throw refuse('This consent form is unknown or has expired.');
        const cookieValue = readCookie(req, cookie.name);
        if (!cookieValue || !sameHex(sha256Hex(cookieValue), pending.cookie_hash)) throw refuse('The consent cookie is missing or does not match this form. Open the consent page again from the application.');
        if (pending.used_at !== null) throw refuse('This consent form was already used.');
        // A paste reserves an attempt against the address's failures (all instances share the count); a valid key gives it back.
        const attempt: PasteAttempt | undefined = decision === 'allow' ? await guard.reserve(req.ip, now) : undefined;
        // One use: whoever flips used_at first owns the handle.
        const consumed = await deps.db.query('UPDATE oauth_consent_requests SET used_at = $2 WHERE handle_hash = $1 AND used_at IS NULL', [sha256Hex(handle), now.toISOString()]);
        if (consumed.rowCount !== 1) throw refuse('This consent form was already used.');

        const back = new URL(pending.redirect_uri);
        const finish = (params: Record<string, string>) => {
          for (const [k, v] of Object.entries(params)) back.searchParams.append(k, v);
          if (pending.state !== null) back.searchParams.append('state', pending.state);
          back.searchParams.append('iss', urls.issuer);
          securityHeaders(reply);
          return reply.code(302).header('location', back.href).send();
        };
        if (decision === 'deny') return finish({ error: 'access_denied' });

        const key = param(body, 'api_key');
        if (typeof key !== 'string' || !API_KEY_PATTERN.test(key.trim())) throw refuse('The API key is not valid.');
        const hash = hashKey(key.trim());
        const keys = await deps.db.query<{ key_id: string; org_id: string; project_id: string | null; environment: 'live' | 'test'; scopes: string[]; key_hash: string; revoked_at: Date | null }>(
          'SELECT key_id, org_id, project_id, environment, scopes, key_hash, revoked_at FROM api_keys WHERE key_hash = $1',
          [hash],
        );
        const k = keys.rows[0];
        if (!k || k.revoked_at !== null || !sameHex(k.key_hash, hash)) throw refuse('The API key is not valid.');
        await guard.giveBack(attempt!);
        const scopes = pending.scopes ?? k.scopes;
        const wider = scopes.filter((s) => !hasScope(k.scopes, s));
        if (wider.length > 0) throw refuse(`The application asks for more than this API key holds: ${wider.join(' ')}.`);

        const grantId = newGrantId();
        const code = mintSecret('code', grantId);
        const result = await handleCommand(
          deps.store,
          oauthGrantDecider,
          oauthGrantStream(grantId),
          {
            type: 'create',
            grantId,
            clientId: pending.client_id,
            orgId: k.org_id,
            keyId: k.key_id,
            projectId: k.project_id,
            environment: k.environment,
            scopes,
            redirectUri: pending.redirect_uri,
            codeChallenge: pending.code_challenge,
            codeHash: sha256Hex(code),
            codeExpiresAt: new Date(now.getTime() + OAUTH_CODE_TTL_MS).toISOString(),
          },
          { orgId: k.org_id, projectId: k.project_id, actor: { kind: 'api_key', id: k.key_id }, requestId: String(req.id), now: () => now },
          { expectedRevision: 'no_stream' },
        );
        if (result.lastPosition) await deps.readSide.waitFor(result.lastPosition, deps.readWaitMs);
        return finish({ code });
      } catch (err) {
        return sendError(reply, err);
      }
    },
  });
}
