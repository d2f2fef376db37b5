import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import * as oauth from 'oauth4webapi';

// Drives our OAuth server the way its clients do: oauth4webapi's requests go
// to the app through inject (the bytes fastify sees are the ones fetch would
// send), and the consent form is read out of the page and posted back with
// the page's cookie, as a browser does.

export const ISSUER = 'http://127.0.0.1:8080';

export function injectFetch(app: FastifyInstance): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const body = init.body === undefined || init.body === null ? undefined : String(init.body);
    const res = await app.inject({ method: (init.method ?? 'GET') as 'GET', url: url.pathname + url.search, headers, ...(body !== undefined ? { payload: body } : {}) });
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) for (const x of [v].flat()) if (x !== undefined) out.append(k, String(x));
    return new Response(res.statusCode === 204 || res.statusCode === 304 ? null : new Uint8Array(res.rawPayload), { status: res.statusCode, headers: out });
  }) as typeof fetch;
}

export function clientOptions(app: FastifyInstance) {
  return { [oauth.customFetch]: injectFetch(app) as unknown as (url: string, options: oauth.CustomFetchOptions<string, unknown>) => Promise<Response>, [oauth.allowInsecureRequests]: true } as const;
}

/** The hidden fields of the consent form and the cookie the page set. */
export function readConsentPage(res: LightMyRequestResponse): { fields: Record<string, string>; cookie: string; action: string } {
  const fields: Record<string, string> = {};
  for (const m of res.body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) fields[m[1]!] = m[2]!;
  const action = /<form method="post" action="([^"]+)">/.exec(res.body)?.[1] ?? '';
  const setCookie = [res.headers['set-cookie']].flat()[0] ?? '';
  return { fields, cookie: String(setCookie).split(';')[0]!, action };
}

/** Opens the consent page and submits it with a pasted key, then allows (or denies) on the confirmation that names the grant, as a browser would. */
export async function consent(app: FastifyInstance, authorizeUrl: URL | string, apiKey: string, decision: 'allow' | 'deny' = 'allow'): Promise<LightMyRequestResponse> {
  const u = new URL(String(authorizeUrl));
  const page = await app.inject({ method: 'GET', url: u.pathname + u.search });
  if (page.statusCode !== 200) throw new Error(`consent page answered ${page.statusCode}: ${page.body}`);
  const { fields, cookie, action } = readConsentPage(page);
  const pasted = await app.inject({
    method: 'POST',
    url: action,
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    payload: new URLSearchParams({ ...fields, api_key: apiKey, decision }).toString(),
  });
  return confirmConsent(app, pasted, cookie, decision);
}

/** The confirmation a valid pasted key leads to (a 200 page with its form), answered with `decision`; any other answer as it is. */
export async function confirmConsent(app: FastifyInstance, res: LightMyRequestResponse, cookie: string, decision: 'allow' | 'deny' = 'allow'): Promise<LightMyRequestResponse> {
  if (res.statusCode !== 200 || !res.body.includes('id="grant"')) return res;
  const { fields, action } = readConsentPage(res);
  return app.inject({ method: 'POST', url: action, headers: { 'content-type': 'application/x-www-form-urlencoded', cookie }, payload: new URLSearchParams({ ...fields, decision }).toString() });
}

export type Pkce = { verifier: string; challenge: string };
export async function pkce(): Promise<Pkce> {
  const verifier = oauth.generateRandomCodeVerifier();
  return { verifier, challenge: await oauth.calculatePKCECodeChallenge(verifier) };
}

export function authorizeUrl(as: { authorization_endpoint?: string }, params: Record<string, string>): URL {
  const u = new URL(as.authorization_endpoint ?? `${ISSUER}/oauth/authorize`);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u;
}

/**
 * A client registered with `app` and a grant of `apiKey` with all its scopes,
 * through the consent form and the code exchange, as an MCP client gets one.
 */
export async function issueTokens(app: FastifyInstance, apiKey: string, issuerUrl: string = ISSUER): Promise<{ as: oauth.AuthorizationServer; client: oauth.Client; access_token: string; refresh_token: string; expires_in: number }> {
  const opts = clientOptions(app);
  const issuer = new URL(issuerUrl);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...opts, algorithm: 'oauth2' }));
  const client = await oauth.processDynamicClientRegistrationResponse(
    await oauth.dynamicClientRegistrationRequest(as, { redirect_uris: ['http://127.0.0.1/callback'], client_name: 'Token probe', token_endpoint_auth_method: 'none' }, opts),
  );
  const p = await pkce();
  const state = oauth.generateRandomState();
  const url = authorizeUrl(as, { client_id: client.client_id, redirect_uri: 'http://127.0.0.1/callback', response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256', state, scope: '*' });
  const res = await consent(app, url, apiKey);
  if (res.statusCode !== 302) throw new Error(`consent answered ${res.statusCode}: ${res.body}`);
  const params = oauth.validateAuthResponse(as, client, new URL(String(res.headers.location)), state);
  const tokens = await oauth.processAuthorizationCodeResponse(as, client, await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, 'http://127.0.0.1/callback', p.verifier, opts));
  return { as, client, access_token: tokens.access_token, refresh_token: tokens.refresh_token!, expires_in: tokens.expires_in ?? 0 };
}
