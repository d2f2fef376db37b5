import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

// Dashboard requests without a browser (app.inject), as a browser sends them:
// forms url-encoded, Sec-Fetch-Site same-origin, the session cookie.

export const FORM = { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' };

export const post = (app: FastifyInstance, url: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url, headers: { ...FORM, ...headers }, payload: new URLSearchParams(fields).toString() });

/** The value of a Set-Cookie of the answer. */
export function setCookie(r: LightMyRequestResponse, name: string): string | undefined {
  return r.cookies.find((c) => c.name === name)?.value;
}

type Outbox = { messages: { subject: string; code: string }[] };
export async function dashboardCodes(sandboxUrl: string, email: string): Promise<string[]> {
  const box = (await (await fetch(`${sandboxUrl}/_sandbox/outbox?email=${encodeURIComponent(email)}`)).json()) as Outbox;
  return box.messages.filter((m) => m.subject === 'Your dashboard sign-in code').map((m) => m.code);
}

/** Asks a code: the challenge id the answer redirects to. */
export async function askCode(app: FastifyInstance, email: string): Promise<{ challenge: string; res: LightMyRequestResponse }> {
  const res = await post(app, '/dashboard/sign-in', { email });
  const challenge = new URL(res.headers.location as string, 'http://x').searchParams.get('c') ?? '';
  return { challenge, res };
}

/** Signs in through the code pages; the session cookie's value. */
export async function signInInject(app: FastifyInstance, sandboxUrl: string, email: string, cookie?: string): Promise<string> {
  const before = (await dashboardCodes(sandboxUrl, email)).length;
  const { challenge } = await askCode(app, email);
  let codes: string[] = [];
  for (let i = 0; i < 400 && codes.length <= before; i++) {
    codes = await dashboardCodes(sandboxUrl, email);
    if (codes.length <= before) await new Promise((r) => setTimeout(r, 25));
  }
  const r = await post(app, '/dashboard/sign-in/code', { c: challenge, code: codes[0]! }, cookie ? { cookie: `dash_session=${cookie}` } : {});
  const secret = setCookie(r, 'dash_session');
  if (r.statusCode !== 303 || !secret) throw new Error(`sign-in answered ${r.statusCode}: ${r.body.slice(0, 300)}`);
  return secret;
}

/** The CSRF token of a page the cookie opens (its meta tag). */
export async function csrfOf(app: FastifyInstance, cookie: string): Promise<string> {
  const r = await app.inject({ method: 'GET', url: '/dashboard/account', headers: { cookie: `dash_session=${cookie}` } });
  const m = /<meta name="csrf-token" content="([^"]+)"/.exec(r.body);
  if (!m) throw new Error(`no CSRF token on the page (${r.statusCode})`);
  return m[1]!;
}
