import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';

// The OAuth 2.0 authorization server of each sandbox `oauth` provider, at
// /<slug>/oauth/authorize (a consent page: the person enters the e-mail of
// their account and allows or denies) and /<slug>/oauth/token (grants
// authorization_code with PKCE S256, and refresh_token). Clients are
// registered by the platform (registerClient); a code is single use, lives ten
// minutes, and is bound to its client, redirect_uri and code challenge. Access
// tokens live an hour on the injected clock; refresh tokens do not expire.

export type SandboxOAuthClient = { client_id: string; client_secret: string; redirect_uris: string[] };
type Code = { slug: string; clientId: string; redirectUri: string; challenge: string; scope: string; email: string; expiresAt: number; used: boolean };
type Token = { slug: string; email: string; scope: string; expiresAt: number };

/** What the authorization servers keep across restarts (codes live ten minutes and are not kept). */
export type OAuthSaved = { clients: (SandboxOAuthClient & { slug: string })[]; access: [string, Token][]; refresh: [string, Omit<Token, 'expiresAt'>][] };

export const SANDBOX_ACCESS_TOKEN_TTL_S = 3600;
const CODE_TTL_MS = 10 * 60_000;

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

export class SandboxOAuth {
  private readonly clients = new Map<string, SandboxOAuthClient & { slug: string }>();
  private readonly codes = new Map<string, Code>();
  private readonly access = new Map<string, Token>();
  private readonly refresh = new Map<string, Omit<Token, 'expiresAt'>>();
  /** Token requests seen (grant types), for tests. */
  readonly grants: string[] = [];

  constructor(
    private readonly now: () => Date,
    private readonly account: (slug: string, email: string) => { id: string; name: string },
  ) {}

  snapshot(): OAuthSaved {
    return { clients: [...this.clients.values()], access: [...this.access], refresh: [...this.refresh] };
  }

  restore(s: OAuthSaved): void {
    for (const c of s.clients) this.clients.set(c.client_id, c);
    for (const [t, v] of s.access) this.access.set(t, v);
    for (const [t, v] of s.refresh) this.refresh.set(t, v);
  }

  /** The platform's client at a provider for exactly these redirect URIs: the one registered before (a restart), else a new one. */
  clientFor(slug: string, redirectUris: string[]): SandboxOAuthClient {
    for (const c of this.clients.values()) if (c.slug === slug && c.redirect_uris.join(' ') === redirectUris.join(' ')) return { client_id: c.client_id, client_secret: c.client_secret, redirect_uris: c.redirect_uris };
    return this.registerClient(slug, redirectUris);
  }

  /** Registers the platform's confidential client at a provider. */
  registerClient(slug: string, redirectUris: string[]): SandboxOAuthClient {
    const c = { client_id: `cli_${randomBytes(8).toString('hex')}`, client_secret: `cs_${randomBytes(20).toString('hex')}`, redirect_uris: redirectUris };
    this.clients.set(c.client_id, { ...c, slug });
    return c;
  }

  /** The e-mail of the account a live access token belongs to; undefined when unknown or expired. */
  accessToken(slug: string, token: string): string | undefined {
    const t = this.access.get(token);
    return t && t.slug === slug && t.expiresAt > this.now().getTime() ? t.email : undefined;
  }

  handle(slug: string, rest: string, method: string, url: URL, raw: string, res: http.ServerResponse): void {
    if (rest === 'authorize' && method === 'GET') return this.authorizePage(slug, url.searchParams, res);
    if (rest === 'authorize' && method === 'POST') return this.consent(slug, new URLSearchParams(raw), res);
    if (rest === 'token' && method === 'POST') return this.token(slug, new URLSearchParams(raw), res);
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not_found' }));
  }

  private html(res: http.ServerResponse, status: number, title: string, body: string): void {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head><body><h1>${esc(title)}</h1>${body}</body></html>`);
  }

  /** Checks an authorization request; an error is shown on the page, never redirected. */
  private check(slug: string, q: URLSearchParams): string | { clientId: string; redirectUri: string; challenge: string; scope: string; state: string } {
    const client = this.clients.get(q.get('client_id') ?? '');
    if (!client || client.slug !== slug) return 'unknown client_id';
    const redirectUri = q.get('redirect_uri') ?? '';
    if (!client.redirect_uris.includes(redirectUri)) return 'redirect_uri is not registered for this client';
    if (q.get('response_type') !== 'code') return 'response_type must be code';
    if (q.get('code_challenge_method') !== 'S256' || !/^[A-Za-z0-9_-]{43}$/.test(q.get('code_challenge') ?? '')) return 'a PKCE S256 code_challenge is required';
    return { clientId: client.client_id, redirectUri, challenge: q.get('code_challenge')!, scope: q.get('scope') ?? '', state: q.get('state') ?? '' };
  }

  private authorizePage(slug: string, q: URLSearchParams, res: http.ServerResponse): void {
    const c = this.check(slug, q);
    if (typeof c === 'string') return this.html(res, 400, 'Authorization request refused', `<p id="error">${esc(c)}</p>`);
    const hidden = ['client_id', 'redirect_uri', 'response_type', 'code_challenge', 'code_challenge_method', 'scope', 'state'].map((n) => `<input type="hidden" name="${n}" value="${esc(q.get(n) ?? '')}">`).join('');
    this.html(
      res,
      200,
      `Connect your ${slug} account`,
      `<p>The platform asks for: <span id="scope">${esc(c.scope || '(default)')}</span></p>
<form method="post" action="/${esc(slug)}/oauth/authorize">${hidden}
<label>Account e-mail <input name="email" id="email" type="email" required></label>
<button name="decision" value="allow" id="allow">Allow</button> <button name="decision" value="deny" id="deny">Deny</button></form>`,
    );
  }

  private consent(slug: string, f: URLSearchParams, res: http.ServerResponse): void {
    const c = this.check(slug, f);
    if (typeof c === 'string') return this.html(res, 400, 'Authorization request refused', `<p id="error">${esc(c)}</p>`);
    const back = new URL(c.redirectUri);
    if (c.state) back.searchParams.set('state', c.state);
    const email = (f.get('email') ?? '').trim();
    if (f.get('decision') !== 'allow') back.searchParams.set('error', 'access_denied');
    else if (!/^[^@\s]+@[^@\s]+$/.test(email)) return this.html(res, 400, 'Authorization request refused', '<p id="error">an account e-mail is required</p>');
    else {
      const code = `code_${randomBytes(20).toString('hex')}`;
      this.codes.set(code, { slug, clientId: c.clientId, redirectUri: c.redirectUri, challenge: c.challenge, scope: c.scope, email, expiresAt: this.now().getTime() + CODE_TTL_MS, used: false });
      back.searchParams.set('code', code);
    }
    res.writeHead(302, { location: back.toString() }).end();
  }

  private token(slug: string, f: URLSearchParams, res: http.ServerResponse): void {
    const fail = (error: string, description: string): void => void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error, error_description: description }));
    const client = this.clients.get(f.get('client_id') ?? '');
    if (!client || client.slug !== slug || !sameText(client.client_secret, f.get('client_secret') ?? '')) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_client' }));
      return;
    }
    const grant = f.get('grant_type') ?? '';
    this.grants.push(grant);
    let subject: Omit<Token, 'expiresAt'>;
    let refreshToken: string;
    if (grant === 'authorization_code') {
      const code = this.codes.get(f.get('code') ?? '');
      if (!code || code.slug !== slug) return fail('invalid_grant', 'unknown code');
      if (code.used) return fail('invalid_grant', 'code already used');
      code.used = true;
      if (code.expiresAt <= this.now().getTime()) return fail('invalid_grant', 'code expired');
      if (code.clientId !== client.client_id || code.redirectUri !== f.get('redirect_uri')) return fail('invalid_grant', 'code bound to another client or redirect_uri');
      const verifier = f.get('code_verifier') ?? '';
      if (createHash('sha256').update(verifier).digest('base64url') !== code.challenge) return fail('invalid_grant', 'PKCE verification failed');
      subject = { slug, email: code.email, scope: code.scope };
      refreshToken = `rt_${randomBytes(24).toString('hex')}`;
      this.refresh.set(refreshToken, subject);
    } else if (grant === 'refresh_token') {
      refreshToken = f.get('refresh_token') ?? '';
      const r = this.refresh.get(refreshToken);
      if (!r || r.slug !== slug) return fail('invalid_grant', 'unknown refresh token');
      subject = r;
    } else return fail('unsupported_grant_type', `grant ${grant} is not supported`);
    const accessToken = `at_${randomBytes(24).toString('hex')}`;
    this.access.set(accessToken, { ...subject, expiresAt: this.now().getTime() + SANDBOX_ACCESS_TOKEN_TTL_S * 1000 });
    const account = this.account(slug, subject.email);
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(
      JSON.stringify({ access_token: accessToken, token_type: 'Bearer', expires_in: SANDBOX_ACCESS_TOKEN_TTL_S, refresh_token: refreshToken, scope: subject.scope, account_id: account.id }),
    );
  }
}
